"""The GPT demo (python/examples/gpt_train.py) at a toy size: CommIR's AdamW steps of
the captured GPT on the 2x4 mesh and on one device against PyTorch's own loop; its
byte-pair encoding against merges worked by hand; and a missing text is a clear error.
//python:gpt_demo_test runs the demo's own size."""

import io
import os
import runpy

import numpy as np
import pytest

PATH = os.path.join(os.path.dirname(__file__), "..", "examples", "gpt_train.py")


def test_toy_gpt_trains_like_pytorch_on_the_mesh_and_one_device(tmp_path):
    demo = runpy.run_path(PATH)
    text = tmp_path / "text.txt"
    text.write_bytes(bytes(range(256)) * 4)
    out = io.StringIO()
    reference, mesh, one = demo["train"](3, batch=2, seq=8, dim=16, heads=4, layers=1, vocab=260, text=str(text),
                                         out=out)
    assert len(reference) == len(mesh) == len(one) == 3
    for r, m, o in zip(reference, mesh, one):
        assert abs(m - r) <= 1e-5 * abs(r) and abs(o - r) <= 1e-5 * abs(r), (r, m, o)
    assert "commir 2x4" in out.getvalue()


def test_missing_text_is_a_clear_error():
    demo = runpy.run_path(PATH)
    with pytest.raises(SystemExit, match="/nonexistent/GPL-3 is absent"):
        demo["read_text"]("/nonexistent/GPL-3")


def _bytes(text):
    return np.frombuffer(text, dtype=np.uint8)


def test_byte_pair_encoding_merges_the_most_frequent_pair_first():
    bpe = runpy.run_path(PATH)["byte_pair_encoding"]
    # "abababc": ab 3 times, ba twice, bc once; then (ab)(ab) twice, (ab)c once.
    tokens, pairs = bpe(_bytes(b"abababc"), 1)
    assert tokens.tolist() == [256, 256, 256, ord("c")] and pairs == [(ord("a"), ord("b"))]
    tokens, pairs = bpe(_bytes(b"abababc"), 2)
    assert tokens.tolist() == [257, 256, ord("c")] and pairs == [(ord("a"), ord("b")), (256, 256)]
    # Ties go to the smaller pair: "xyzxyz" has xy, yz twice each (zx once).
    tokens, pairs = bpe(_bytes(b"xyzxyz"), 1)
    assert tokens.tolist() == [256, ord("z"), 256, ord("z")] and pairs == [(ord("x"), ord("y"))]


def test_byte_pair_encoding_of_a_run_does_not_overlap():
    bpe = runpy.run_path(PATH)["byte_pair_encoding"]
    assert bpe(_bytes(b"aaaa"), 1)[0].tolist() == [256, 256]
    assert bpe(_bytes(b"aaaaa"), 1)[0].tolist() == [256, 256, ord("a")]
    assert bpe(_bytes(b"baaab"), 1)[0].tolist() == [ord("b"), 256, ord("a"), ord("b")]


def test_byte_pair_encoding_decodes_to_the_text():
    bpe = runpy.run_path(PATH)["byte_pair_encoding"]
    text = b"the quick brown fox jumps over the lazy dog; " * 5 + b"aaaaaaa bbb"
    tokens, pairs = bpe(_bytes(text), 40)

    def expand(token):
        return bytes([token]) if token < 256 else b"".join(expand(t) for t in pairs[token - 256])

    assert len(tokens) < len(text) and b"".join(expand(t) for t in tokens.tolist()) == text


def test_byte_pair_encoding_of_a_text_too_short_is_a_clear_error():
    bpe = runpy.run_path(PATH)["byte_pair_encoding"]
    with pytest.raises(SystemExit, match="no pair of tokens left that occurs twice after 1 merges"):
        bpe(_bytes(b"abab"), 2)


def _comm_report_totals(report, func):
    """(count, bytes/device) of the `total` row of func's comm-report block."""
    block = report.split("// comm-report @%s:" % func)[1].split("// comm-report")[0]
    count, sent = block.split("total")[1].split()[1::2][:2]
    return int(count), int(sent)


def test_the_demo_size_is_partitioned_as_megatron_lm_with_ddp():
    """At the demo's own size the partitioner keeps the batch over dp and the vocabulary
    over tp: Megatron-LM's VocabParallelEmbedding all_reduce, one all_reduce after each
    block's attention and MLP (and one before each in the backward), the vocabulary-parallel
    loss's statistics all_reduced instead of the logits gathered, no weight gathered, and
    every gradient all_reduced over dp as DDP does."""
    import commir
    import torch
    demo = runpy.run_path(PATH)
    vocab, batch, seq, dim, layers = demo["VOCAB"], demo["BATCH"], demo["SEQ"], demo["DIM"], demo["LAYERS"]
    dp, tp = demo["MESH"]["dp"], demo["MESH"]["tp"]
    tokens = np.arange(4 * batch * seq, dtype=np.int64) % vocab
    example = demo["batches"](tokens, 1, batch, seq)[0]
    torch.manual_seed(0)
    model = demo["GPT"](vocab=vocab, dim=dim, heads=demo["HEADS"], layers=layers, seq=seq)
    trainer = demo["trainer"](model, example, demo["Hyperparameters"](), demo["MESH"])
    forward = commir.opt(trainer.captured.module, commir.DEFAULT_SPMD_PIPELINE)
    activation = "f32[%d, %d, %d]" % (batch // dp, seq, dim)
    rows = "f32[%d, 1]" % (batch // dp * seq)

    table = demo["collectives"](forward, "gpt")
    assert {key: count for key, (count, _) in table.items()} == {
        ("all_reduce", "tp", "sum", activation): 1 + 2 * layers,  # the embedding, each block's two
        ("all_reduce", "tp", "max", rows): 1,                     # the loss: each token's max logit,
        ("all_reduce", "tp", "sum", rows): 1,                     # its sum of exponentials,
        ("all_reduce", "tp", "sum", "f32[]"): 1,                  # the target logits' share (a mean)
        ("all_reduce", "dp", "sum", "f32[2]"): 1,                 # the mean over dp: [sum, count]
    }
    assert _comm_report_totals(forward.comm_report(), "gpt") == (
        sum(c for c, _ in table.values()), round(sum(b for _, b in table.values())))

    table = demo["collectives"](trainer.step_module, "gpt_step")
    counts = {key: count for key, (count, _) in table.items()}
    gathered = [key for key in counts if key[0] == "all_gather"]
    assert all(axes == "dp" for _, axes, _, _ in gathered), gathered  # no weight, no logits over tp
    assert not any(result.startswith("f32[%d" % (vocab // tp)) for _, _, _, result in gathered)
    assert counts[("all_reduce", "tp", "sum", activation)] == 1 + 4 * layers
    assert counts[("all_reduce", "tp", "max", rows)] == 1 and counts[("all_reduce", "tp", "sum", rows)] == 1
    # DDP: what is all_reduced over dp covers every parameter's gradient on a device.
    layouts = demo["megatron_layouts"](model)
    local = sum(p.numel() // (tp if "tp" in layouts.get(n, []) else 1) for n, p in model.named_parameters())
    over_dp = 0
    for (kind, axes, _, result), count in counts.items():
        if kind == "all_reduce" and "dp" in axes:
            dims = [int(d) for d in result[4:-1].split(",") if d.strip()]
            over_dp += count * int(np.prod(dims))
    assert local <= over_dp <= local + 8, (local, over_dp)
    assert _comm_report_totals(trainer.step_module.comm_report(), "gpt_step") == (
        sum(counts.values()), round(sum(b for _, b in table.values())))


def test_report_prints_the_partitioned_functions_collectives(tmp_path):
    demo = runpy.run_path(PATH)
    text = tmp_path / "text.txt"
    text.write_bytes(bytes(range(256)) * 4)
    out = io.StringIO()
    demo["report"](batch=2, seq=8, dim=16, heads=4, layers=1, vocab=260, text=str(text), out=out)
    lines = out.getvalue().splitlines()
    assert lines[1] == "forward @gpt:" and any(line.startswith("step @gpt_step") for line in lines)
    assert lines[-1].startswith("predicted step (sim, h100-sxm): 2x4 mesh ")


@pytest.mark.parametrize("flag", ["--vocab=250", "--vocab=1027", "--batch=3", "--heads=6", "--dim=30", "--seq=0"])
def test_sizes_the_mesh_cannot_split_are_usage_errors(flag, capsys):
    demo = runpy.run_path(PATH)
    with pytest.raises(SystemExit) as exit_info:
        demo["main"]([flag, "--steps=1"])
    assert exit_info.value.code == 2 and "must be" in capsys.readouterr().err
