#include "parser/parser.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "commir/check.h"
#include "commir/name_hash.h"
#include "commir/verifier.h"
#include "parser/body_skipper.h"
#include "parser/lexer.h"

namespace commir {
namespace {

// An operand as written: a value, or a number literal typed once the other operands
// are known.
struct PendingOperand {
  Value* value = nullptr;
  double literal = 0;
  Location loc;
  // An integer literal that a double (which holds literals) cannot represent exactly:
  // an error if it turns out to be an index or integer value.
  absl::string_view inexact_integer;
};

// Loops and attribute lists nest at most this deep. The parser, the verifier, the
// printer and the IR's destructors recurse once per level, so unbounded nesting would
// overflow the stack; real programs nest a few levels.
constexpr int kMaxNestingDepth = 64;

// A statement's result names and written result types: inline storage, as nearly every
// statement has one of each (no heap allocation per statement).
using ResultNames = absl::InlinedVector<Token, 2>;
using TypeList = absl::InlinedVector<Type, 2>;

class Parser {
 public:
  Parser(absl::string_view source, DiagnosticEngine& diagnostics)
      : source_(source), diagnostics_(diagnostics) {}

  std::unique_ptr<Module> Run(const ParseOptions& options) {
    verify_ = options.verify;
    module_ = std::make_unique<Module>();
    ParseMeshes();
    ParseFunctions();
    if (options.verify) VerifyModule(*module_, diagnostics_);
    if (diagnostics_.has_errors()) return nullptr;
    return std::move(module_);
  }

 private:
  // ---- Token helpers ------------------------------------------------------------

  // Tokens are read on demand (see Lexer): cur_ is the current token and ahead_ the
  // ones peeked past it. A Mark comes back to a token: the first pass records where
  // each declaration starts, and Recover() re-reads a broken statement.
  struct Mark {
    Lexer::State state;     // the lexer before the token (and the trivia before it)
    int32_t prev_line = 0;  // the line of the token before it; 0 at the start
  };

  const Token& Cur() const { return cur_; }
  // The token `ahead` (1 or 2) past the current one; end of file past the end.
  const Token& Peek(size_t ahead = 1) {
    COMMIR_CHECK(ahead >= 1 && ahead <= kMaxLookahead, "peeking too far ahead");
    while (num_ahead_ < ahead) {
      ahead_start_[num_ahead_] = lexer_.state();
      lexer_.Next(ahead_[num_ahead_]);
      ++num_ahead_;
    }
    return ahead_[ahead - 1];
  }
  void Advance() {
    if (cur_.kind == TokenKind::kEof) return;
    prev_line_ = cur_.loc.line;
    if (num_ahead_ == 0) {
      cur_start_ = lexer_.state();
      lexer_.Next(cur_);
      return;
    }
    cur_start_ = ahead_start_[0];
    cur_ = ahead_[0];
    for (size_t i = 1; i < num_ahead_; ++i) {
      ahead_start_[i - 1] = ahead_start_[i];
      ahead_[i - 1] = ahead_[i];
    }
    --num_ahead_;
  }
  Mark Here() const { return Mark{cur_start_, prev_line_}; }
  // Whether the current token comes after the one `mark` points at.
  bool PastMark(const Mark& mark) const { return cur_start_.pos > mark.state.pos; }
  void Reset(const Mark& mark) {
    lexer_.set_state(mark.state);
    num_ahead_ = 0;
    prev_line_ = mark.prev_line;
    cur_start_ = mark.state;
    lexer_.Next(cur_);
  }
  bool AtEnd() const { return Cur().kind == TokenKind::kEof; }

  bool ConsumeIf(TokenKind kind) {
    if (Cur().kind != kind) return false;
    Advance();
    return true;
  }
  bool ConsumeKeyword(absl::string_view word) {
    if (!Cur().IsIdentifier(word)) return false;
    Advance();
    return true;
  }

  void Error(Location loc, std::string message) { diagnostics_.Error(loc, std::move(message)); }

  std::string Describe(const Token& token) const {
    if (token.kind == TokenKind::kEof) return "end of file";
    if (token.kind == TokenKind::kError) {
      if (!token.text.empty() && token.text[0] == '"') return "an unterminated string";
      // The lexer makes one token of a well-formed non-ASCII character.
      if (token.text.size() == 1 && static_cast<unsigned char>(token.text[0]) >= 0x80) {
        return absl::StrCat("invalid byte ", DescribeCharacter(token.text));
      }
      return absl::StrCat("invalid character ", DescribeCharacter(token.text));
    }
    // Token text is shown escaped and cut short (a name may be megabytes long).
    std::string shown = ShownText(token.text);
    if (token.kind == TokenKind::kValueName) shown = absl::StrCat("%", shown);
    if (token.kind == TokenKind::kSymbol) shown = absl::StrCat("@", shown);
    if (token.kind == TokenKind::kString) shown = absl::StrCat("\"", shown, "\"");
    return absl::StrCat("'", shown, "'");
  }

  bool Expect(TokenKind kind, absl::string_view what) {
    if (ConsumeIf(kind)) return true;
    Error(Cur().loc, absl::StrCat("expected ", what, ", got ", Describe(Cur())));
    return false;
  }

  // ---- Top level ----------------------------------------------------------------

  bool AtDeclStart() const {
    return Cur().IsIdentifier("mesh") || Cur().IsIdentifier("func") ||
           Cur().IsIdentifier("spmd");
  }

  // Skips to the next token that can start a declaration at the beginning of a line.
  void SkipToNextDecl() {
    int line = Cur().loc.line;
    Advance();
    while (!AtEnd() && !(AtDeclStart() && Cur().loc.line != line && IsFirstOnLine())) Advance();
  }
  bool IsFirstOnLine() const { return prev_line_ == 0 || prev_line_ != Cur().loc.line; }

  // Skips a function declaration that starts at the current `func` or `spmd func`: up
  // to and including its balanced body, or up to the next `mesh`, `func` or `spmd` that
  // begins a line (the body is unterminated; ParseBlockBody stops there too, so that a
  // missing '}' costs one error and not the declarations after it).
  // Inside the body, a '{' that does not end its line (an attribute dictionary) is
  // taken as closed at the end of the line, as Recover() does.
  void SkipFunction() {
    if (ConsumeKeyword("spmd")) ConsumeKeyword("func");
    else Advance();  // 'func'
    SkipResult skipped = SkipFunctionBody(source_, cur_start_, prev_line_);
    Reset(Mark{skipped.resume, skipped.prev_line});
  }

  // Pass 1: meshes first, so that functions declared before their mesh can use it to
  // infer per-device types.
  void ParseMeshes() {
    Reset(Mark{Lexer::Start(source_), 0});
    while (!AtEnd()) {
      Mark start = Here();
      if (Cur().IsIdentifier("mesh")) {
        decl_starts_.push_back({start, true, false, nullptr});
        std::unique_ptr<Mesh> mesh = ParseMesh();
        if (mesh == nullptr) {
          SkipToNextDecl();
          decl_starts_.back().mesh_failed = true;
        } else {
          if (!meshes_by_name_.contains(mesh->name())) meshes_by_name_[mesh->name()] = mesh.get();
          decl_starts_.back().mesh = std::move(mesh);
        }
      } else if (Cur().IsIdentifier("func") || Cur().IsIdentifier("spmd")) {
        decl_starts_.push_back({start, false, false, nullptr});
        SkipFunction();
      } else {
        Error(Cur().loc, absl::StrCat("expected 'mesh', 'func' or 'spmd func', got ", Describe(Cur())));
        SkipToNextDecl();
      }
    }
  }

  void ParseFunctions() {
    // Counted once here, not per function (a module may have very many functions).
    for (const DeclStart& decl : decl_starts_) {
      mesh_decl_count_ += decl.is_mesh ? 1 : 0;
      any_mesh_failed_ |= decl.mesh_failed;
    }
    for (DeclStart& decl : decl_starts_) {
      if (decl.is_mesh) {
        if (decl.mesh != nullptr) module_->AddMesh(std::move(decl.mesh));
        continue;
      }
      Reset(decl.start);
      ParseFunction();
    }
    module_->ResolveMeshes();
  }

  std::unique_ptr<Mesh> ParseMesh() {
    Location loc = Cur().loc;
    Advance();  // 'mesh'
    if (!Cur().Is(TokenKind::kSymbol)) {
      Expect(TokenKind::kSymbol, "a mesh name like @m");
      return nullptr;
    }
    std::string name(Cur().text);
    Advance();
    if (!Expect(TokenKind::kLParen, "'(' after the mesh name")) return nullptr;
    std::vector<MeshAxis> axes;
    while (!Cur().Is(TokenKind::kRParen)) {
      if (!axes.empty() && !Expect(TokenKind::kComma, "',' or ')'")) return nullptr;
      if (!Cur().Is(TokenKind::kIdentifier)) {
        Expect(TokenKind::kIdentifier, "an axis name");
        return nullptr;
      }
      MeshAxis axis{std::string(Cur().text), 1, Cur().loc};
      Advance();
      if (!Expect(TokenKind::kEqual, "'=' after the axis name")) return nullptr;
      std::optional<int64_t> size = ParseInteger("an axis size");
      if (!size) return nullptr;
      axis.size = *size;
      axes.push_back(std::move(axis));
    }
    Advance();  // ')'
    return std::make_unique<Mesh>(std::move(name), std::move(axes), loc);
  }

  std::optional<int64_t> ParseInteger(absl::string_view what) {
    if (!Cur().Is(TokenKind::kInteger)) {
      Error(Cur().loc, absl::StrCat("expected ", what, " (an integer), got ", Describe(Cur())));
      return std::nullopt;
    }
    int64_t value = 0;
    absl::string_view text = Cur().text;
    if (!text.empty() && text[0] == '+') text.remove_prefix(1);
    if (!absl::SimpleAtoi(text, &value)) {
      Error(Cur().loc, absl::StrCat("integer ", Cur().text, " is out of range"));
      return std::nullopt;
    }
    Advance();
    return value;
  }

  // ---- Types --------------------------------------------------------------------

  // Parses a type; on error reports it and returns the null type.
  Type ParseType() {
    Location type_loc = Cur().loc;
    if (ConsumeKeyword("index")) return Type::Index();
    if (!Cur().Is(TokenKind::kIdentifier)) {
      Error(Cur().loc, absl::StrCat("expected a type, got ", Describe(Cur())));
      return Type();
    }
    std::optional<ElementType> element_type = ParseElementType(Cur().text);
    if (!element_type) {
      Error(Cur().loc, absl::StrCat("unknown element type '", ShownText(Cur().text),
                                    "' (expected f64, f32, f16, bf16, i64, i32, i1 or index)"));
      return Type();
    }
    Advance();
    if (!Expect(TokenKind::kLBracket, "'[' after the element type")) return Type();
    absl::InlinedVector<int64_t, 6> dims;
    // Filled only up to the last sharded dimension (Type::Tensor pads it with empty
    // lists), so that unsharded types allocate nothing for it.
    std::vector<AxisList> dim_axes;
    int64_t zigzag_dim = -1;
    while (!Cur().Is(TokenKind::kRBracket)) {
      if (!dims.empty() && !Expect(TokenKind::kComma, "',' or ']' in the shape")) return Type();
      Location dim_loc = Cur().loc;
      std::optional<int64_t> dim = ParseInteger("a dimension size");
      if (!dim) return Type();
      if (*dim < 0) {
        Error(dim_loc, absl::StrCat("dimension sizes cannot be negative, got ", *dim));
        return Type();
      }
      dims.push_back(*dim);
      AxisList axes;
      if (Cur().Is(TokenKind::kSymbol)) {
        axes.push_back(std::string(Cur().text));
        Advance();
      } else if (ConsumeIf(TokenKind::kAt)) {
        if (!ParseAxisGroup(axes)) return Type();
      }
      // `4096@sp zigzag`: the load-balanced layout of a split dimension (Type::zigzag_dim).
      if (Location zigzag_loc = Cur().loc; ConsumeKeyword("zigzag")) {
        if (axes.empty()) {
          Error(zigzag_loc, "'zigzag' must follow a split dimension, as in '4096@sp zigzag'");
          return Type();
        }
        if (zigzag_dim >= 0) {
          Error(zigzag_loc, absl::StrCat("only one dimension of a type may be zigzag; "
                                         "dimension ", zigzag_dim, " already is"));
          return Type();
        }
        zigzag_dim = static_cast<int64_t>(dims.size()) - 1;
      }
      if (!axes.empty()) {
        dim_axes.resize(dims.size());
        dim_axes.back() = std::move(axes);
      }
    }
    Advance();  // ']'
    AxisList partial;
    if (ConsumeKeyword("partial")) {
      if (!ParseAxisGroup(partial)) return Type();
    }
    // An unsharded type (nearly all) is looked up from the dims as they are.
    Type type = dim_axes.empty() && partial.empty()
                    ? Type::UnshardedTensor(*element_type, dims)
                    : Type::Tensor(*element_type, std::vector<int64_t>(dims.begin(), dims.end()),
                                   std::move(dim_axes), std::move(partial), zigzag_dim);
    if (ElementCountOverflows(type)) {
      Error(type_loc, absl::StrCat("type ", type.ToString(),
                                   " has more elements than fit in 64 bits"));
      return Type();
    }
    return type;
  }

  // `(a, b, ...)`: a non-empty parenthesized list of axis names.
  bool ParseAxisGroup(AxisList& axes) {
    if (!Expect(TokenKind::kLParen, "'(' to start an axis group")) return false;
    while (true) {
      if (!Cur().Is(TokenKind::kIdentifier)) {
        Error(Cur().loc, absl::StrCat("expected an axis name, got ", Describe(Cur())));
        return false;
      }
      axes.push_back(std::string(Cur().text));
      Advance();
      if (ConsumeIf(TokenKind::kRParen)) return true;
      if (!Expect(TokenKind::kComma, "',' or ')' in the axis group")) return false;
    }
  }

  // `T` or `(T0, T1, ...)`.
  bool ParseTypeList(TypeList& types, Location& loc) {
    loc = Cur().loc;
    if (ConsumeIf(TokenKind::kLParen)) {
      while (!Cur().Is(TokenKind::kRParen)) {
        if (!types.empty() && !Expect(TokenKind::kComma, "',' or ')' in the type list")) return false;
        Type t = ParseType();
        if (t.is_null()) return false;
        types.push_back(t);
      }
      Advance();
      return true;
    }
    Type t = ParseType();
    if (t.is_null()) return false;
    types.push_back(t);
    return true;
  }

  // ---- Functions ----------------------------------------------------------------

  void ParseFunction() {
    bool spmd = ConsumeKeyword("spmd");
    Location loc = Cur().loc;
    if (!ConsumeKeyword("func")) {
      Error(Cur().loc, absl::StrCat("expected 'func' after 'spmd', got ", Describe(Cur())));
      return;
    }
    if (!Cur().Is(TokenKind::kSymbol)) {
      Expect(TokenKind::kSymbol, "a function name like @f");
      return;
    }
    auto function = std::make_unique<Function>(std::string(Cur().text), spmd, loc);
    Advance();
    struct Arg {
      std::string name;
      Location name_loc;
      Type type;
      Location type_loc;
    };
    std::vector<Arg> args;
    if (!Expect(TokenKind::kLParen, "'(' to start the arguments")) return;
    while (!Cur().Is(TokenKind::kRParen)) {
      if (!args.empty() && !Expect(TokenKind::kComma, "',' or ')' in the arguments")) return;
      if (!Cur().Is(TokenKind::kValueName)) {
        Expect(TokenKind::kValueName, "an argument name like %x");
        return;
      }
      Arg arg{std::string(Cur().text), Cur().loc, Type(), {}};
      Advance();
      if (!Expect(TokenKind::kColon, "':' and the argument's type")) return;
      arg.type_loc = Cur().loc;
      arg.type = ParseType();
      if (arg.type.is_null()) return;
      args.push_back(std::move(arg));
    }
    Advance();  // ')'
    if (ConsumeIf(TokenKind::kArrow)) {
      if (Cur().Is(TokenKind::kLParen)) {
        Advance();
        while (!Cur().Is(TokenKind::kRParen)) {
          if (!function->result_types().empty() &&
              !Expect(TokenKind::kComma, "',' or ')' in the result types")) {
            return;
          }
          Location type_loc = Cur().loc;
          Type t = ParseType();
          if (t.is_null()) return;
          function->AddResult(t, type_loc);
        }
        Advance();
      } else {
        Location type_loc = Cur().loc;
        Type t = ParseType();
        if (t.is_null()) return;
        function->AddResult(t, type_loc);
      }
    }
    if (ConsumeKeyword("on")) {
      if (!Cur().Is(TokenKind::kSymbol)) {
        Expect(TokenKind::kSymbol, "a mesh name after 'on'");
        return;
      }
      function->set_mesh_name(std::string(Cur().text), Cur().loc);
      Advance();
    }
    const Mesh* mesh = nullptr;
    if (!function->mesh_name().empty()) {
      auto it = meshes_by_name_.find(function->mesh_name());
      if (it != meshes_by_name_.end()) mesh = it->second;
    } else if (meshes_by_name_.size() == 1 && mesh_decl_count_ == 1) {
      mesh = meshes_by_name_.begin()->second;
    }
    function->set_mesh(mesh);
    for (Arg& arg : args) {
      function->AddArgument(arg.type, arg.name, arg.name_loc, arg.type_loc);
      // An argument whose layout is invalid is reported by the verifier; poison it
      // here so that its uses do not repeat the complaint.
      // Without verification nothing reports it: keep the type, so that a returned
      // module never holds typeless values.
      if (verify_ && !ValidateLayout(arg.type, mesh).ok()) {
        function->body()->argument(function->body()->num_arguments() - 1)->set_type(Type());
      }
    }
    // Without a body the function is dropped (like any other malformed signature), so
    // that the verifier does not also report its missing 'return'.
    if (!Cur().Is(TokenKind::kLBrace)) {
      Expect(TokenKind::kLBrace, "'{' to start the function body");
      return;
    }
    function_ = function.get();
    // A function whose mesh did not resolve while some mesh declaration failed to parse
    // probably uses that mesh: its body is parsed for syntax errors, but it is neither
    // typed nor verified, since every problem found would stem from the missing mesh.
    parsing_detached_ = mesh == nullptr && any_mesh_failed_;
    Function* added = function.get();
    if (parsing_detached_) {
      detached_functions_.push_back(std::move(function));
    } else {
      module_->AddFunction(std::move(function));
    }
    names_.clear();
    // Most statements define one name and take a few dozen bytes: sizing the table for
    // the function up front avoids rehashing it as a large body is read.
    names_.reserve(RemainingDeclBytes() / 40 + added->body()->num_arguments());
    ParseBlockBody(added->body(), added->body()->arguments());
    function_ = nullptr;
    parsing_detached_ = false;
  }

  // Bytes from here to the next declaration (or the end of the file).
  // decl_starts_ is in source order (the first pass appends as it scans), so the next
  // declaration is found by binary search: a linear scan per function would make
  // files with many functions quadratic.
  size_t RemainingDeclBytes() const {
    size_t here = cur_start_.pos;
    auto next = std::upper_bound(
        decl_starts_.begin(), decl_starts_.end(), here,
        [](size_t pos, const DeclStart& d) { return pos < d.start.state.pos; });
    size_t end = next == decl_starts_.end() ? source_.size() : next->start.state.pos;
    return end - here;
  }

  // ---- Names --------------------------------------------------------------------

  void DefineName(Value* value) {
    auto [it, inserted] = names_.insert(value);
    if (!inserted && (*it)->owner_block() == &poison_) {
      // The name was used before this definition (already reported as undefined); the
      // stand-in made for that use is not a definition.
      names_.erase(it);
      names_.insert(value);
      inserted = true;
    }
    if (!inserted) {
      Location first = (*it)->loc();
      Error(value->loc(), absl::StrFormat("redefinition of %%%s (first defined at %d:%d)",
                                          value->name(), first.line, first.col));
      return;
    }
    // Names of a function's body go all at once (see ParseBlockBody); only nested
    // scopes keep a list of theirs.
    if (scopes_.size() > 1) scopes_.back().push_back(value->name());
  }

  Value* LookupName(const Token& token) {
    auto it = names_.find(token.text);
    if (it != names_.end()) return *it;
    Error(token.loc, absl::StrCat("use of undefined value %", ShownText(token.text)));
    // A typeless stand-in so that the rest of the statement still parses; it is never
    // reported again.
    Value* poison = poison_.AddArgument(Type(), std::string(token.text), token.loc);
    names_.insert(poison);
    return poison;
  }

  // ---- Blocks and statements ----------------------------------------------------

  // Parses `{ statements }` into `block`, with `args` (the block's arguments) and the
  // names defined inside visible only there.
  void ParseBlockBody(Block* block, absl::Span<Value* const> args = {}) {
    Advance();  // '{'
    scopes_.emplace_back();
    for (Value* arg : args) DefineName(arg);
    bool broken = false;
    while (!Cur().Is(TokenKind::kRBrace) && !AtEnd()) {
      if (AtDeclStart() && IsFirstOnLine()) break;
      Mark start = Here();
      if (!ParseStatement(block)) {
        broken = true;
        Recover(start);
      }
    }
    if (scopes_.size() == 1) {
      // Leaving a function body: no name stays visible (and names_ is cleared before the
      // next function anyway), so drop them all at once.
      names_.clear();
    } else {
      for (absl::string_view name : scopes_.back()) names_.erase(name);
    }
    scopes_.pop_back();
    bool closed = Cur().Is(TokenKind::kRBrace);
    if (!closed) {
      Error(Cur().loc, absl::StrCat("expected '}' to close the block, got ", Describe(Cur())));
    } else {
      Advance();
    }
    // A broken statement may have been (or swallowed) the terminator: end the block with
    // a stand-in so that the verifier does not report the same mistake again.
    if ((broken || !closed) && (block->empty() || !block->back()->def().Has(kTerminator))) {
      AppendPlaceholderTerminator(block);
    }
  }

  // `return` / `yield` with one typeless operand per expected value (the verifier skips
  // typeless values).
  void AppendPlaceholderTerminator(Block* block) {
    Operation* loop = block->parent_op();
    size_t count = loop != nullptr ? static_cast<size_t>(loop->num_results())
                                   : function_->result_types().size();
    std::vector<Value*> operands;
    for (size_t i = 0; i < count; ++i) operands.push_back(poison_.AddArgument(Type(), ""));
    const OpDef& def = GetOpDef(loop != nullptr ? OpKind::kYield : OpKind::kReturn);
    block->Append(Operation::Create(def, operands, {}, AttrDict(), 0, Cur().loc));
  }

  // Whether the '{' `brace`, followed by `next`, opens a block (it ends its line)
  // rather than an attribute dictionary or a one-line body (more tokens follow on its
  // line).
  static bool OpensBlock(const Token& brace, const Token& next) {
    return next.Is(TokenKind::kEof) || next.loc.line != brace.loc.line;
  }
  bool CurOpensBlock() { return OpensBlock(cur_, Peek(1)); }

  // Skips the rest of a broken statement that began at token `start`: to the end of its
  // line, past any block it opened (and the rest of the line that closes it, like
  // `} : T`), or up to the '}' that closes the enclosing block or a declaration that
  // begins a line. A '{' that does not end its line (an attribute dictionary) is taken
  // as closed at the end of the line, so that `{value = 1.0 : f32[4]` does not swallow
  // the statements after it. A statement that was read to its end (the error is about
  // its meaning, or the parser stopped at the first token of the next line) leaves
  // nothing to skip.
  void Recover(const Mark& start) {
    std::vector<bool> open;  // braces still open; true for a block, false for a line
    auto end_line = [&open] {
      while (!open.empty() && !open.back()) open.pop_back();
    };
    bool advanced = PastMark(start);
    if (advanced) {
      // The statement's tokens from `start` up to and including the current one, read
      // again (tokens are not kept; this is the error path).
      std::vector<Token> read;
      Lexer relexer(source_);
      relexer.set_state(start.state);
      while (true) {
        bool is_current = relexer.offset() == cur_start_.pos;
        read.push_back(relexer.Next());
        if (is_current) break;
        COMMIR_CHECK(!read.back().Is(TokenKind::kEof), "the current token was not re-read");
      }
      for (size_t i = 0; i + 1 < read.size(); ++i) {
        if (i > 0 && read[i].loc.line != read[i - 1].loc.line) end_line();
        if (read[i].Is(TokenKind::kLBrace)) open.push_back(OpensBlock(read[i], read[i + 1]));
        if (read[i].Is(TokenKind::kRBrace) && !open.empty()) open.pop_back();
      }
    }
    if (advanced && IsFirstOnLine()) end_line();
    if (open.empty() && advanced && IsFirstOnLine()) return;
    int line = advanced ? prev_line_ : Cur().loc.line;
    while (!AtEnd()) {
      const Token& t = Cur();
      if (AtDeclStart() && IsFirstOnLine()) return;
      if (t.loc.line != line) {
        end_line();
        if (open.empty()) return;
        line = t.loc.line;
      }
      if (t.Is(TokenKind::kRBrace)) {
        if (open.empty()) return;
        open.pop_back();
      } else if (t.Is(TokenKind::kLBrace)) {
        open.push_back(CurOpensBlock());
      }
      Advance();
    }
  }

  bool ParseOperand(PendingOperand& operand) {
    const Token& t = Cur();
    operand.loc = t.loc;
    if (t.Is(TokenKind::kValueName)) {
      operand.value = LookupName(t);
      Advance();
      return true;
    }
    std::optional<double> number = NumberToken(t);
    if (number) {
      operand.literal = *number;
      if (t.Is(TokenKind::kInteger) && !ExactInDouble(t.text)) operand.inexact_integer = t.text;
      Advance();
      return true;
    }
    Error(t.loc, absl::StrCat("expected an operand (%value or number), got ", Describe(t)));
    return false;
  }

  // Whether the integer `text` fits in an int64 and a double holds it exactly (its odd
  // part has at most 53 bits).
  static bool ExactInDouble(absl::string_view text) {
    if (!text.empty() && text[0] == '+') text.remove_prefix(1);
    int64_t value = 0;
    if (!absl::SimpleAtoi(text, &value)) return false;
    uint64_t magnitude = value < 0 ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
    if (magnitude == 0) return true;
    return (magnitude >> __builtin_ctzll(magnitude)) < (uint64_t{1} << 53);
  }

  // The value of an integer, float, `inf` or `nan` token.
  std::optional<double> NumberToken(const Token& t) {
    if (t.Is(TokenKind::kIdentifier)) {
      if (t.text == "inf") return INFINITY;
      if (t.text == "nan") return NAN;
      return std::nullopt;
    }
    if (!t.Is(TokenKind::kInteger) && !t.Is(TokenKind::kFloat)) return std::nullopt;
    absl::string_view text = t.text;
    if (text == "-inf") return -INFINITY;
    if (text == "+inf") return INFINITY;
    if (!text.empty() && text[0] == '+') text.remove_prefix(1);
    double value = 0;
    if (!absl::SimpleAtod(text, &value)) return std::nullopt;
    return value;
  }

  bool ParseTerminator(Block* block, const OpDef& def) {
    Location loc = Cur().loc;
    int line = loc.line;
    Advance();
    std::vector<PendingOperand> operands;
    // Operands follow on the same line: `return` alone returns nothing.
    if (Cur().loc.line == line && !Cur().Is(TokenKind::kRBrace)) {
      while (true) {
        PendingOperand operand;
        if (!ParseOperand(operand)) return false;
        operands.push_back(operand);
        if (!ConsumeIf(TokenKind::kComma)) break;
      }
    }
    std::vector<Value*> values;
    for (const PendingOperand& operand : operands) {
      if (operand.value == nullptr) {
        Error(operand.loc, absl::StrCat("'", def.name, "' takes values, not number literals"));
        return false;
      }
      values.push_back(operand.value);
    }
    block->Append(Operation::Create(def, values, {}, AttrDict(), 0, loc));
    return true;
  }

  bool ParseStatement(Block* block) {
    if (Cur().IsIdentifier("return")) return ParseTerminator(block, GetOpDef(OpKind::kReturn));
    if (Cur().IsIdentifier("yield")) return ParseTerminator(block, GetOpDef(OpKind::kYield));
    ResultNames result_names;
    if (ParseStatementWithResults(block, result_names)) return true;
    // The statement is broken: its result names stand for typeless values from here on,
    // so that their uses are not reported as undefined (one mistake, one error).
    for (const Token& name : result_names) {
      if (names_.contains(name.text)) continue;
      Value* poison = poison_.AddArgument(Type(), std::string(name.text), name.loc);
      names_.insert(poison);
      if (scopes_.size() > 1) scopes_.back().push_back(poison->name());
    }
    return false;
  }

  // A statement after any `return` / `yield`: `%a, %b = op(...) ...` or `for`. Fills
  // `result_names` with the names it read.
  bool ParseStatementWithResults(Block* block, ResultNames& result_names) {
    if (Cur().Is(TokenKind::kValueName)) {
      while (true) {
        if (!Cur().Is(TokenKind::kValueName)) {
          Expect(TokenKind::kValueName, "a result name");
          return false;
        }
        result_names.push_back(Cur());
        Advance();
        if (ConsumeIf(TokenKind::kEqual)) break;
        if (!Expect(TokenKind::kComma, "',' or '=' after the result name")) return false;
      }
    }
    if (!Cur().Is(TokenKind::kIdentifier)) {
      Error(Cur().loc, absl::StrCat("expected an op name, got ", Describe(Cur())));
      return false;
    }
    if (Cur().IsIdentifier("for")) return ParseFor(block, result_names);
    const OpDef* def = LookupOp(Cur().text);
    Location op_loc = Cur().loc;
    if (def == nullptr || def->Has(kTerminator) || def->kind == OpKind::kFor) {
      Error(op_loc, absl::StrCat("unknown op '", ShownText(Cur().text), "'"));
      return false;
    }
    Advance();
    // `call @f(...)`: the callee is written as a symbol before the operands.
    std::optional<Attribute> callee;
    if (def->kind == OpKind::kCall) {
      if (!Cur().Is(TokenKind::kSymbol)) {
        Expect(TokenKind::kSymbol, "the called function's name like @f after 'call'");
        return false;
      }
      callee = Attribute::Ident(std::string(Cur().text));
      Advance();
    }
    if (!Cur().Is(TokenKind::kLParen)) {  // (the message is built only when needed)
      Expect(TokenKind::kLParen, absl::StrCat("'(' after '", def->name, "'"));
      return false;
    }
    Advance();
    // Inline storage (here and in BuildOp): no heap allocation for the usual few operands.
    absl::InlinedVector<PendingOperand, 4> operands;
    while (!Cur().Is(TokenKind::kRParen)) {
      if (!operands.empty() && !Expect(TokenKind::kComma, "',' or ')' in the operands")) return false;
      PendingOperand operand;
      if (!ParseOperand(operand)) return false;
      operands.push_back(operand);
    }
    Advance();  // ')'
    AttrDict attrs;
    Value* stream = nullptr;
    Location attrs_loc = Cur().loc;
    if (Cur().Is(TokenKind::kLBrace) && !ParseAttributes(attrs, stream)) return false;
    if (callee.has_value()) {
      if (attrs.Has("callee")) {
        Error(attrs_loc, "the callee is written 'call @f(...)', not as an attribute");
        return false;
      }
      attrs.Set("callee", *std::move(callee));
    }
    TypeList annotated;
    Location type_loc;
    if (ConsumeIf(TokenKind::kColon) && !ParseTypeList(annotated, type_loc)) return false;
    return BuildOp(block, *def, op_loc, result_names, operands, std::move(attrs), stream,
                   annotated, type_loc);
  }

  bool ParseAttributes(AttrDict& attrs, Value*& stream) {
    Advance();  // '{'
    while (!Cur().Is(TokenKind::kRBrace)) {
      if (!attrs.empty() || stream != nullptr) {
        if (!Expect(TokenKind::kComma, "',' or '}' in the attributes")) return false;
      }
      if (!Cur().Is(TokenKind::kIdentifier)) {
        Error(Cur().loc, absl::StrCat("expected an attribute name, got ", Describe(Cur())));
        return false;
      }
      std::string key(Cur().text);
      Location key_loc = Cur().loc;
      Advance();
      if (attrs.Has(key) || (key == "stream" && stream != nullptr)) {
        Error(key_loc, absl::StrCat("attribute '", key, "' is given twice"));
        return false;
      }
      if (!ConsumeIf(TokenKind::kEqual)) {
        attrs.Set(std::move(key), Attribute::Bool(true));
        continue;
      }
      if (Cur().Is(TokenKind::kValueName)) {
        if (key != "stream") {
          Error(Cur().loc, absl::StrCat("attribute '", key, "' cannot be a value; only 'stream' can"));
          return false;
        }
        stream = LookupName(Cur());
        Advance();
        continue;
      }
      std::optional<Attribute> value = ParseAttributeValue(0);
      if (!value) return false;
      attrs.Set(std::move(key), *std::move(value));
    }
    Advance();  // '}'
    return true;
  }

  std::optional<Attribute> ParseAttributeValue(int depth) {
    const Token t = Cur();  // a copy: it is read after Advance()
    switch (t.kind) {
      case TokenKind::kInteger: {
        std::optional<int64_t> v = ParseInteger("an integer");
        if (!v) return std::nullopt;
        return Attribute::Int(*v);
      }
      case TokenKind::kFloat: {
        std::optional<double> v = NumberToken(t);
        if (!v) {
          Error(t.loc, absl::StrCat("invalid number ", ShownText(t.text)));
          return std::nullopt;
        }
        Advance();
        return Attribute::Float(*v);
      }
      case TokenKind::kString: {
        std::string value;
        for (size_t i = 0; i < t.text.size(); ++i) {
          if (t.text[i] == '\\' && i + 1 < t.text.size()) ++i;
          value.push_back(t.text[i]);
        }
        Advance();
        return Attribute::String(std::move(value));
      }
      case TokenKind::kIdentifier: {
        Advance();
        if (t.text == "true") return Attribute::Bool(true);
        if (t.text == "false") return Attribute::Bool(false);
        if (t.text == "inf") return Attribute::Float(INFINITY);
        if (t.text == "nan") return Attribute::Float(NAN);
        return Attribute::Ident(std::string(t.text));
      }
      case TokenKind::kLBracket: {
        if (depth >= kMaxNestingDepth) {
          Error(t.loc, absl::StrFormat("lists nest too deeply (at most %d levels)",
                                       kMaxNestingDepth));
          return std::nullopt;
        }
        Advance();
        std::vector<Attribute> items;
        while (!Cur().Is(TokenKind::kRBracket)) {
          if (!items.empty() && !Expect(TokenKind::kComma, "',' or ']' in the list")) return std::nullopt;
          std::optional<Attribute> item = ParseAttributeValue(depth + 1);
          if (!item) return std::nullopt;
          items.push_back(*std::move(item));
        }
        Advance();
        return Attribute::List(std::move(items));
      }
      case TokenKind::kLParen: {
        AxisList axes;
        if (!ParseAxisGroup(axes)) return std::nullopt;
        return Attribute::Axes(std::move(axes));
      }
      default:
        Error(t.loc, absl::StrCat("expected an attribute value, got ", Describe(t)));
        return std::nullopt;
    }
  }

  // Types the literal operands after the other operands: a literal takes the element
  // type (or index) of the first value operand.
  bool ResolveOperands(const OpDef& def, Location op_loc, absl::Span<const PendingOperand> pending,
                       absl::InlinedVector<Value*, 4>& values,
                       absl::InlinedVector<std::pair<int, double>, 2>& literals,
                       Type& literal_type) {
    Value* partner = nullptr;
    for (const PendingOperand& p : pending) {
      if (p.value != nullptr && partner == nullptr) partner = p.value;
    }
    for (size_t i = 0; i < pending.size(); ++i) {
      if (pending[i].value != nullptr) {
        values.push_back(pending[i].value);
        continue;
      }
      if (!def.Has(kAllowsLiteral)) {
        Error(pending[i].loc, absl::StrCat("'", def.name, "' does not take number literals"));
        return false;
      }
      if (partner == nullptr) {
        Error(op_loc, absl::StrCat("'", def.name, "' needs at least one operand that is a value"));
        return false;
      }
      literals.push_back({static_cast<int>(i), pending[i].literal});
      values.push_back(nullptr);
    }
    // (Only literals use it; most ops have none.)
    Type t = partner == nullptr || literals.empty() ? Type() : partner->type();
    if (t.is_index()) {
      literal_type = Type::Index();
    } else if (t.is_tensor()) {
      literal_type = Type::Scalar(t.element_type());
    }
    if (t.is_index() || (t.is_tensor() && IsIntegerType(t.element_type()))) {
      for (const PendingOperand& p : pending) {
        if (p.value == nullptr && !p.inexact_integer.empty()) {
          Error(p.loc, absl::StrCat("integer literal ", p.inexact_integer,
                                    " cannot be represented exactly: literals are held as "
                                    "doubles"));
          return false;
        }
      }
    }
    return true;
  }

  bool BuildOp(Block* block, const OpDef& def, Location op_loc,
               absl::Span<const Token> result_names, absl::Span<const PendingOperand> pending,
               AttrDict attrs, Value* stream, absl::Span<const Type> annotated,
               Location type_loc) {
    absl::InlinedVector<Value*, 4> values;
    absl::InlinedVector<std::pair<int, double>, 2> literals;
    Type literal_type;
    if (!ResolveOperands(def, op_loc, pending, values, literals, literal_type)) return false;
    int num_results = static_cast<int>(result_names.size());
    if (num_results < def.min_results || (def.max_results >= 0 && num_results > def.max_results)) {
      Error(op_loc, absl::StrFormat("'%s' produces %s, but %d name%s given", def.name,
                                    def.min_results == def.max_results
                                        ? absl::StrFormat("%d result%s", def.min_results,
                                                          def.min_results == 1 ? "" : "s")
                                        : absl::StrFormat("%d to %d results", def.min_results,
                                                          def.max_results),
                                    num_results, num_results == 1 ? " is" : "s are"));
      return false;
    }
    // Operand types as the op sees them (literals typed), null if any is unknown.
    absl::InlinedVector<Type, 4> operand_types;
    bool typed = !literal_type.is_null() || literals.empty();
    for (Value* v : values) {
      Type t = v == nullptr ? literal_type : v->type();
      typed &= !t.is_null();
      operand_types.push_back(t);
    }
    bool spmd = function_->is_spmd();
    bool context_ok = !(def.Has(kGlobalOnly) && spmd) &&
                      !(def.Has(kSpmdOnly) && !spmd && !def.Has(kIndexOperands));
    // The inferred types, or else the written ones, or else null types (filled below, so
    // that the usual, inferred case allocates once).
    std::vector<Type> result_types;
    bool inferred_types = false;
    // An op found invalid here is reported once: its results get no type, so that
    // their uses (and the verifier) do not repeat the complaint.
    bool rejected = false;
    // On an invalid mesh (the verifier reports it) group sizes mean nothing. Without
    // verification nothing would report these, and every value must get a type.
    bool mesh_ok = function_->mesh() == nullptr || function_->mesh()->IsWellFormed();
    if (typed && !parsing_detached_ && ((context_ok && mesh_ok) || !verify_)) {
      if (absl::Status s = ValidateAttributes(def, attrs, spmd); !s.ok()) {
        Error(op_loc, std::string(s.message()));
        rejected = true;
      } else {
        OpSignature sig{operand_types, attrs, annotated, num_results, function_->mesh(), spmd};
        absl::StatusOr<std::vector<Type>> inferred = InferResultTypes(def, sig);
        if (inferred.ok()) {
          result_types = *std::move(inferred);
          inferred_types = true;
        } else {
          Error(op_loc, std::string(inferred.status().message()));
          rejected = true;
        }
      }
    }
    if (!inferred_types) {
      if (!rejected && annotated.size() == static_cast<size_t>(num_results)) {
        result_types.assign(annotated.begin(), annotated.end());
      } else {
        result_types.assign(num_results, Type());
      }
    }
    // Literals are attached after creation (the op owns them); without literals the
    // operands are passed to Create directly (the same operands and use lists, with one
    // allocation instead of one per operand).
    std::unique_ptr<Operation> op = Operation::Create(
        def, literals.empty() ? absl::Span<Value* const>(values) : absl::Span<Value* const>(),
        result_types, std::move(attrs), 0, op_loc);
    size_t next_literal = 0;
    for (size_t i = 0; i < values.size() && !literals.empty(); ++i) {
      if (values[i] != nullptr) {
        op->AddOperand(values[i]);
      } else {
        Value* literal = op->AddLiteralOperand(
            literals[next_literal++].second,
            literal_type.is_null() ? Type::Scalar(ElementType::kF32) : literal_type);
        literal->set_loc(pending[i].loc);
      }
    }
    if (stream != nullptr) op->SetStreamOperand(stream);
    op->set_type_loc(annotated.empty() ? Location{} : type_loc);
    Operation* added = block->Append(std::move(op));
    for (int i = 0; i < num_results; ++i) {
      Value* result = added->result(i);
      result->set_name(std::string(result_names[i].text));
      result->set_loc(result_names[i].loc);
      DefineName(result);
    }
    return true;
  }

  bool ParseFor(Block* block, absl::Span<const Token> result_names) {
    const OpDef& def = GetOpDef(OpKind::kFor);
    Location loc = Cur().loc;
    if (loop_depth_ >= kMaxNestingDepth) {
      Error(loc, absl::StrFormat("loops nest too deeply (at most %d levels)", kMaxNestingDepth));
      return false;
    }
    Advance();  // 'for'
    if (!Cur().Is(TokenKind::kValueName)) {
      Expect(TokenKind::kValueName, "the induction variable, like %i");
      return false;
    }
    Token induction = Cur();
    Advance();
    if (!Expect(TokenKind::kEqual, "'=' after the induction variable")) return false;
    std::optional<int64_t> lower = ParseInteger("the lower bound");
    if (!lower) return false;
    if (!ConsumeKeyword("to")) {
      Error(Cur().loc, absl::StrCat("expected 'to', got ", Describe(Cur())));
      return false;
    }
    std::optional<int64_t> upper = ParseInteger("the upper bound");
    if (!upper) return false;
    int64_t step = 1;
    if (ConsumeKeyword("step")) {
      std::optional<int64_t> s = ParseInteger("the step");
      if (!s) return false;
      step = *s;
    }
    std::vector<Token> iter_names;
    std::vector<PendingOperand> inits;
    if (ConsumeKeyword("iter")) {
      if (!Expect(TokenKind::kLParen, "'(' after 'iter'")) return false;
      while (!Cur().Is(TokenKind::kRParen)) {
        if (!iter_names.empty() && !Expect(TokenKind::kComma, "',' or ')' in iter(...)")) return false;
        if (!Cur().Is(TokenKind::kValueName)) {
          Expect(TokenKind::kValueName, "a carried value name");
          return false;
        }
        iter_names.push_back(Cur());
        Advance();
        if (!Expect(TokenKind::kEqual, "'=' and the initial value")) return false;
        PendingOperand init;
        if (!ParseOperand(init)) return false;
        if (init.value == nullptr) {
          Error(init.loc, "a carried value's initial value must be a value, not a number");
          return false;
        }
        inits.push_back(init);
      }
      Advance();
    }
    // Attributes other than the bounds, like `{stream = 1}`, come before the body. A
    // '{' followed by `key =`, `key,` or `key}` starts them (a body starts with a value
    // name, an op name and '(', `for`, or `yield`).
    AttrDict attrs;
    Value* stream = nullptr;
    if (Cur().Is(TokenKind::kLBrace) && Peek(1).Is(TokenKind::kIdentifier) &&
        !Peek(1).IsIdentifier("yield") && !Peek(1).IsIdentifier("return") &&
        (Peek(2).Is(TokenKind::kEqual) || Peek(2).Is(TokenKind::kComma) ||
         Peek(2).Is(TokenKind::kRBrace))) {
      Location attrs_loc = Peek(1).loc;
      if (!ParseAttributes(attrs, stream)) return false;
      for (absl::string_view bound : {"lower", "upper", "step"}) {
        if (attrs.Has(bound)) {
          Error(attrs_loc, absl::StrCat("the loop's '", bound, "' is written in its header"));
          return false;
        }
      }
    }
    if (!Cur().Is(TokenKind::kLBrace)) {
      Expect(TokenKind::kLBrace, "'{' to start the loop body");
      return false;
    }
    std::vector<Value*> init_values;
    std::vector<Type> init_types;
    for (const PendingOperand& init : inits) {
      init_values.push_back(init.value);
      init_types.push_back(init.value->type());
    }
    AttrDict all_attrs;
    all_attrs.Set("lower", Attribute::Int(*lower));
    all_attrs.Set("upper", Attribute::Int(*upper));
    all_attrs.Set("step", Attribute::Int(step));
    for (const auto& [key, value] : attrs.entries()) all_attrs.Set(key, value);
    std::unique_ptr<Operation> op =
        Operation::Create(def, init_values, init_types, std::move(all_attrs), 1, loc);
    if (stream != nullptr) op->SetStreamOperand(stream);
    Block* body = op->region(0);
    Value* iv = body->AddArgument(Type::Index(), std::string(induction.text), induction.loc);
    std::vector<Value*> carried;
    for (size_t i = 0; i < iter_names.size(); ++i) {
      carried.push_back(body->AddArgument(init_types[i], std::string(iter_names[i].text),
                                          iter_names[i].loc));
    }
    Operation* added = block->Append(std::move(op));
    std::vector<Value*> body_args = {iv};
    body_args.insert(body_args.end(), carried.begin(), carried.end());
    ++loop_depth_;
    ParseBlockBody(body, body_args);
    --loop_depth_;
    TypeList annotated;
    Location type_loc;
    if (ConsumeIf(TokenKind::kColon)) {
      if (!ParseTypeList(annotated, type_loc)) return false;
      added->set_type_loc(type_loc);
    }
    if (result_names.size() != iter_names.size()) {
      Error(loc, absl::StrFormat("the loop carries %d value%s but %d result name%s given",
                                 iter_names.size(), iter_names.size() == 1 ? "" : "s",
                                 result_names.size(), result_names.size() == 1 ? " is" : "s are"));
    } else if (!annotated.empty() &&
               !std::equal(annotated.begin(), annotated.end(), init_types.begin(), init_types.end())) {
      Error(type_loc, "the loop's result types must be the types of its carried values");
    }
    for (size_t i = 0; i < result_names.size() && i < static_cast<size_t>(added->num_results()); ++i) {
      Value* result = added->result(static_cast<int>(i));
      result->set_name(std::string(result_names[i].text));
      result->set_loc(result_names[i].loc);
      DefineName(result);
    }
    return true;
  }

  struct DeclStart {
    Mark start;
    bool is_mesh;
    bool mesh_failed = false;
    std::unique_ptr<Mesh> mesh;  // a parsed mesh, until ParseFunctions adds it
  };

  absl::string_view source_;
  DiagnosticEngine& diagnostics_;
  Lexer lexer_{source_};
  Token cur_;
  Lexer::State cur_start_;
  int32_t prev_line_ = 0;
  static constexpr size_t kMaxLookahead = 2;
  Token ahead_[kMaxLookahead];
  Lexer::State ahead_start_[kMaxLookahead];
  size_t num_ahead_ = 0;
  std::vector<DeclStart> decl_starts_;
  absl::flat_hash_map<std::string, const Mesh*> meshes_by_name_;
  // Typeless stand-ins for undefined names; declared before module_ so that it outlives
  // the ops that may point at them.
  Block poison_;
  std::unique_ptr<Module> module_;
  Function* function_ = nullptr;
  // Functions parsed only for their syntax (see ParseFunction); declared after poison_
  // (their ops may use its values) and destroyed before it.
  std::vector<std::unique_ptr<Function>> detached_functions_;
  bool parsing_detached_ = false;
  int mesh_decl_count_ = 0;  // `mesh` declarations, parsed or not
  bool any_mesh_failed_ = false;
  bool verify_ = true;  // ParseOptions::verify
  int loop_depth_ = 0;  // `for` bodies being parsed
  // The values in scope, found by name. The table holds only pointers (8-byte slots;
  // a million-op function makes a table of millions of them) and reads each value's
  // own name: the values (in module_ or poison_) outlive it and are not renamed while
  // parsing.
  struct NameOf {
    static absl::string_view Get(const Value* value) { return value->name(); }
    static absl::string_view Get(absl::string_view name) { return name; }
  };
  absl::flat_hash_set<Value*, NameKeyHash<NameOf>, NameKeyEq<NameOf>> names_;
  std::vector<std::vector<absl::string_view>> scopes_;
};

}  // namespace

std::unique_ptr<Module> ParseModule(absl::string_view source, DiagnosticEngine& diagnostics,
                                    const ParseOptions& options) {
  return Parser(source, diagnostics).Run(options);
}

absl::StatusOr<std::unique_ptr<Module>> ParseModuleOrError(absl::string_view source,
                                                           absl::string_view file_name) {
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(source, diagnostics);
  if (module == nullptr) return diagnostics.ToStatus(file_name, source);
  return module;
}

absl::StatusOr<std::unique_ptr<Module>> ParseFile(const std::string& path) {
  std::string source;
  if (path == "-") {
    std::ostringstream buffer;
    buffer << std::cin.rdbuf();
    source = buffer.str();
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
    // A regular file is read straight into the string (one copy of the text instead of
    // three); anything without a size (a pipe) goes through a string stream.
    in.seekg(0, std::ios::end);
    std::streamoff size = in.tellg();
    in.seekg(0, std::ios::beg);
    if (size >= 0 && in) {
      source.resize(static_cast<size_t>(size));
      in.read(source.data(), size);
      source.resize(static_cast<size_t>(in.gcount()));
      // Whatever the size said, read to the end.
      if (in.gcount() == size) {
        std::ostringstream rest;
        rest << in.rdbuf();
        source += rest.str();
      }
    } else {
      in.clear();
      in.seekg(0, std::ios::beg);
      std::ostringstream buffer;
      buffer << in.rdbuf();
      source = buffer.str();
    }
  }
  return ParseModuleOrError(source, path == "-" ? "<stdin>" : path);
}

}  // namespace commir
