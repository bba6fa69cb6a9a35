"""commir's core: parse, print, verify, opt and run, and their errors."""

import numpy as np
import pytest

import commir

MLP = """mesh @m(tp=4)

func @mlp(%x: f32[16@tp, 8], %w1: f32[8, 32@tp], %w2: f32[32@tp, 8]) -> f32[16@tp, 8] {
  %h = matmul(%x, %w1) : f32[16, 32@tp]
  %a = gelu(%h)
  %y = matmul(%a, %w2) : f32[16@tp, 8]
  return %y
}
"""


def gelu(x):
    from math import erf, sqrt
    return x * 0.5 * (1 + np.vectorize(erf)(x / sqrt(2)))


def mlp_inputs(seed=0):
    rng = np.random.default_rng(seed)
    return dict(x=rng.standard_normal((16, 8), dtype=np.float32),
                w1=rng.standard_normal((8, 32), dtype=np.float32),
                w2=rng.standard_normal((32, 8), dtype=np.float32))


def test_print_is_canonical_and_stable():
    m = commir.parse(MLP, "mlp.commir")
    text = m.text()
    assert "%a = gelu(%h) : f32[16, 32@tp]" in text
    assert commir.parse(text).text() == text
    assert m.function_names() == ["mlp"]
    assert m.signature() == [("x", "f32[16@tp, 8]"), ("w1", "f32[8, 32@tp]"), ("w2", "f32[32@tp, 8]")]


def test_run_global_and_partitioned_match_numpy():
    m = commir.parse(MLP)
    inputs = mlp_inputs()
    expected = gelu(inputs["x"].astype(np.float64) @ inputs["w1"]) @ inputs["w2"]
    y = commir.run(m, **inputs)
    assert y.dtype == np.float32 and y.shape == (16, 8)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)
    spmd = commir.opt(m, "propagate-sharding,lower-to-spmd")
    assert "spmd func @mlp" in spmd.text() and "all_gather" in spmd.text()
    np.testing.assert_allclose(commir.run(spmd, func="@mlp", **inputs), y, rtol=1e-5, atol=1e-5)


def test_comm_report():
    spmd = commir.opt(commir.parse(MLP), commir.DEFAULT_SPMD_PIPELINE)
    report = spmd.comm_report()
    assert "comm-report @mlp: spmd on @m (4 devices)" in report
    assert "all_gather       count 1" in report


def test_bf16_through_float32_and_torch():
    torch = pytest.importorskip("torch")
    m = commir.parse("func @f(%x: bf16[4]) -> bf16[4] {\n  %y = add(%x, %x)\n  return %y\n}\n")
    x = np.array([1.0, 1.00390625, 3.14159, -2.5], dtype=np.float32)
    y = commir.run(m, x=x)
    assert y.dtype == np.float32
    expected = (torch.from_numpy(x).to(torch.bfloat16) * 2).float().numpy()
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_array_equal(commir.run(m, x=torch.from_numpy(x).to(torch.bfloat16)), expected)


def test_parse_error_carries_location():
    with pytest.raises(commir.ParseError) as info:
        commir.parse("func @f(%x: f32[4]) -> f32[4] {\n  %y = frobnicate(%x)\n  return %y\n}\n", "bad.commir")
    e = info.value
    assert (e.file, e.line, e.column) == ("bad.commir", 2, 8)
    assert "unknown op 'frobnicate'" in e.message
    assert str(e).startswith("bad.commir:2:8: error: unknown op 'frobnicate'")
    assert isinstance(e, commir.CommirError)


def test_verify_error_carries_location():
    text = "mesh @m(tp=4)\nfunc @f(%x: f32[6@tp]) -> f32[6@tp] {\n  return %x\n}\n"
    with pytest.raises(commir.VerifyError) as info:
        commir.parse(text, "div.commir")
    assert info.value.line == 2 and info.value.file == "div.commir"
    assert "divisible" in info.value.message


def test_parse_rejects_non_text():
    with pytest.raises(TypeError):
        commir.parse(b"func")


def test_bad_pipeline_and_failing_pass():
    m = commir.parse(MLP)
    with pytest.raises(commir.PipelineError, match="no-such-pass"):
        commir.opt(m, "no-such-pass")
    with pytest.raises(commir.PipelineError):
        commir.opt(m, "pipeline-collective-matmul{chunks=0}")
    assert "lower-to-spmd" in commir.pass_names()


def test_run_bad_shape_names_argument():
    m = commir.parse(MLP)
    inputs = mlp_inputs()
    inputs["w1"] = np.zeros((8, 31), dtype=np.float32)
    with pytest.raises(commir.RunError, match=r"argument %w1: array has shape \(8, 31\) but the argument is f32\[8, 32@tp\]"):
        commir.run(m, **inputs)


def test_run_missing_unknown_and_wrong_dtype_arguments():
    m = commir.parse(MLP)
    inputs = mlp_inputs()
    del inputs["w2"]
    with pytest.raises(commir.RunError, match="missing argument %w2"):
        commir.run(m, **inputs)
    with pytest.raises(commir.RunError, match="no argument %z"):
        commir.run(m, z=np.zeros(1), **mlp_inputs())
    with pytest.raises(commir.RunError, match="no function @nope"):
        commir.run(m, func="nope", **mlp_inputs())
    bad = mlp_inputs()
    bad["x"] = np.array([["a"] * 8] * 16)
    with pytest.raises(commir.RunError, match="cannot feed"):
        commir.run(m, **bad)


def test_run_time_error_points_at_op():
    text = ("mesh @m(tp=4)\n"
            "spmd func @f(%x: f32[8]) -> f32[2] on @m {\n"
            "  %i = full() {value = 7} : index\n"
            "  %y = dynamic_slice(%x, %i) {dim = 0, size = 2} : f32[2]\n"
            "  return %y\n}\n")
    m = commir.parse(text, "oob.commir")
    with pytest.raises(commir.RunError) as info:
        commir.run(m, x=np.zeros(8, dtype=np.float32))
    assert info.value.line == 4 and info.value.file == "oob.commir"


def test_failing_pass_points_into_the_source():
    text = ("// a comment line, so that printed and source line numbers differ\n"
            "mesh @m(tp=8)\n\n"
            "spmd func @ag_matmul(%a: f32[1024@tp, 256], %b: f32[256, 512@tp]) -> f32[1024, 512@tp] on @m {\n"
            "  %a_ag = all_gather(%a) {axis = tp, dim = 0} : f32[1024, 256]\n"
            "  %c = matmul(%a_ag, %b) : f32[1024, 64]\n"
            "  return %c\n}\n")
    m = commir.parse(text, "chunks.commir")
    with pytest.raises(commir.PassError) as info:
        commir.opt(m, "pipeline-collective-matmul{chunks=3}")
    e = info.value
    assert (e.file, e.line, e.column) == ("chunks.commir", 5, 11)
    assert "chunks=3 does not divide the 128 rows" in e.message
    # The module is unchanged and a valid pipeline still runs on it.
    assert "all_gather" in commir.opt(m, "pipeline-collective-matmul{chunks=2}").text()


def test_predict_a_llama_layer_at_real_size():
    # The sim backend computes nothing, so a Llama-8B-sized layer predicts in milliseconds.
    from test_builder import llama_layer
    m = llama_layer(4096, 32, 8, 14336, 4096, 8, x_layout=["tp", None]).module()
    spmd = commir.opt(m, commir.DEFAULT_SPMD_PIPELINE)
    plain = commir.predict(spmd, hardware="h100-sxm")
    assert plain.hardware == "h100-sxm" and len(plain.devices) == 8
    assert plain.time_s > 0 and plain.total_flops > 0
    assert plain.devices[0]["peak_memory_bytes"] > 0
    assert "predicted time:" in plain.report
    # Chunking the collectives lets communication hide under compute.
    pipelined = commir.predict(commir.opt(spmd, "pipeline-collective-matmul{chunks=4}"))
    assert pipelined.overlap_fraction > plain.overlap_fraction
    with pytest.raises(commir.RunError, match="unknown hardware 'tpu'"):
        commir.predict(spmd, hardware="tpu")


def test_run_with_argument_names_run_cannot_take_as_keywords():
    m = commir.parse("func @f(%module: f32[2], %func: f32[2], %a.b: f32[2]) -> f32[2] {\n"
                     "  %s = add(%module, %func)\n  %t = add(%s, %a.b)\n  return %t\n}\n")
    one = np.ones(2, dtype=np.float32)
    np.testing.assert_array_equal(commir.run_with(m, {"module": one, "func": one, "a.b": one}), [3, 3])
