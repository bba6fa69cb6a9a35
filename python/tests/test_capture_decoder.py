"""nn.TransformerDecoderLayer captured: self-attention, cross-attention over the encoder
memory (CommIR's attention takes a key/value sequence of its own length), feed-forward;
as the root and inside a model, with the masks nn.Transformer uses."""

import pytest
import torch
import torch.nn as nn

import commir
import commir.torch

DIM, HEADS, FF = 32, 4, 64
TGT, MEM = 8, 6


def decoder(norm_first=False, activation="relu"):
    torch.manual_seed(0)
    layer = nn.TransformerDecoderLayer(DIM, HEADS, FF, dropout=0.1, activation=activation,
                                       batch_first=True, norm_first=norm_first).eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return layer


def inputs():
    torch.manual_seed(1)
    return torch.randn(2, TGT, DIM), torch.randn(2, MEM, DIM)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_as_the_root(norm_first):
    layer = decoder(norm_first, "gelu" if norm_first else "relu")
    tgt, memory = inputs()
    # tgt_mask and the other masks are not given: they stay None, no refusal.
    cap = commir.torch.capture(layer, (tgt, memory))
    names = [n for n, _ in cap.module.signature()]
    assert names[:2] == ["tgt", "memory"] and not any("mask" in n for n in names)
    # Self-attention [2, 4, 8, 8] x [2, 4, 8, 8]; cross-attention queries of the target
    # over the 6 memory positions.
    assert cap.text.count("attention(") == 2 and ": f32[2, 4, 6, 8]" in cap.text
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(cap.run(tgt, memory)), layer(tgt, memory))


class CausalDecoder(nn.Module):
    """A decoder layer inside a model, with nn.Transformer's causal mask as a buffer."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(TGT))
        self.head = nn.Linear(DIM, 16)

    def forward(self, x, memory):
        return self.head(self.layer(x, memory, tgt_mask=self.causal))


@pytest.mark.parametrize("mesh", [{"tp": 4}, {"dp": 2, "tp": 2}])
def test_decoder_layer_inside_a_model_with_a_causal_mask(mesh):
    model = CausalDecoder(decoder()).eval()
    tgt, memory = inputs()
    batch = "dp" if "dp" in mesh else None
    cap = commir.torch.capture(model, (tgt, memory), mesh=mesh,
                               layouts={"x": [batch, "tp", None], "memory": [batch, None, None]})
    # The -inf mask is folded: one causal self-attention, one unmasked cross-attention.
    assert cap.text.count("attention(") == 2 and cap.text.count("causal") == 1
    assert "causal" not in [n for n, _ in cap.module.signature()]
    with torch.no_grad():
        expected = model(tgt, memory)
    torch.testing.assert_close(torch.from_numpy(cap.run(tgt, memory, module=cap.partition())), expected)


def test_masks_given_as_inputs_stay_inputs():
    # A mask the caller passes is a value of the program: a masked softmax, not folded.
    layer = decoder()
    tgt, memory = inputs()
    mask = nn.Transformer.generate_square_subsequent_mask(TGT)
    padding = torch.zeros(2, MEM, dtype=torch.bool)
    padding[1, 4:] = True  # the second sequence's memory is two positions shorter
    cap = commir.torch.capture(layer, (tgt, memory, mask, None, None, padding))
    assert [n for n, _ in cap.module.signature()][:3] == ["tgt", "memory", "tgt_mask"]
    with torch.no_grad():
        expected = layer(tgt, memory, mask, None, None, padding)
    torch.testing.assert_close(torch.from_numpy(cap.run(tgt, memory, mask, padding)), expected)


class BandedDecoder(nn.Module):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer
        band = torch.ones(TGT, TGT, dtype=torch.bool).triu(1) | torch.ones(TGT, TGT, dtype=torch.bool).tril(-3)
        self.register_buffer("band", band)

    def forward(self, x, memory):
        return self.layer(x, memory, tgt_mask=self.band)  # the refused line


def test_a_mask_attention_cannot_take_is_refused_with_the_model_line():
    tgt, memory = inputs()
    with pytest.raises(commir.CaptureError, match="neither causal nor empty") as info:
        commir.torch.capture(BandedDecoder(decoder()).eval(), (tgt, memory))
    message = str(info.value)
    assert "test_capture_decoder.py:%d:" % _line_of("# the refused line") in message
    assert "tgt_mask=self.band" in message


def _line_of(marker):
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "_line_of" not in line)


def test_encoder_and_decoder_stacks():
    # nn.TransformerEncoder / nn.TransformerDecoder as nn.Transformer builds them: two
    # layers each and a final norm; the decoder reads the encoder's output as memory.
    torch.manual_seed(0)
    enc_layer = nn.TransformerEncoderLayer(DIM, HEADS, FF, dropout=0.0, batch_first=True)
    encoder = nn.TransformerEncoder(enc_layer, 2, norm=nn.LayerNorm(DIM)).eval()
    decoder_stack = nn.TransformerDecoder(decoder(), 2, norm=nn.LayerNorm(DIM)).eval()

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder, self.decoder = encoder, decoder_stack
            self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(TGT))

        def forward(self, src, tgt):
            return self.decoder(tgt, self.encoder(src), tgt_mask=self.causal)

    model = Seq2Seq().eval()
    tgt, src = inputs()
    cap = commir.torch.capture(model, (src, tgt), mesh={"tp": 2}, layouts={"src": [None, "tp", None]})
    # 2 encoder self-attentions, 2 causal decoder self-attentions, 2 cross-attentions.
    assert cap.text.count("attention(") == 6 and cap.text.count("causal") == 2
    with torch.no_grad():
        expected = model(src, tgt)
    torch.testing.assert_close(torch.from_numpy(cap.run(src, tgt, module=cap.partition())), expected)
    root = commir.torch.capture(encoder, (src,))
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(root.run(src)), encoder(src))


def test_nn_transformer():
    # Its forward checks sizes (`src.size(1) != tgt.size(1)`): control flow on shapes,
    # decided while tracing; its encoder and decoder stacks are captured as above.
    torch.manual_seed(0)
    transformer = nn.Transformer(DIM, HEADS, 2, 2, FF, dropout=0.0, batch_first=True).eval()

    class Translator(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = transformer
            self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(TGT))

        def forward(self, src, tgt):
            return self.transformer(src, tgt, tgt_mask=self.causal)

    model = Translator().eval()
    tgt, src = inputs()
    cap = commir.torch.capture(model, (src, tgt), mesh={"tp": 2}, layouts={"tgt": [None, "tp", None]})
    assert cap.text.count("attention(") == 6 and cap.text.count("causal") == 2
    with torch.no_grad():
        expected = model(src, tgt)
    torch.testing.assert_close(torch.from_numpy(cap.run(src, tgt, module=cap.partition())), expected)
