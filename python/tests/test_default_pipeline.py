"""The default spmd pipeline ends with combine-all-reduces: a data-parallel step's gradient
all_reduces run in DDP's 25 MiB buckets, bitwise what the partitioned step computes."""

import numpy as np

import commir

# A data-parallel MLP's SGD step on 4 devices (testdata/collectives/combine_training_step).
STEP = """mesh @m(dp=4)

func @mlp(%w1: f32[64, 256], %b1: f32[256], %w2: f32[256, 64], %x: f32[512@dp, 64], %t: f32[512@dp, 64]) -> f32[] {
  %h = matmul(%x, %w1)
  %hb = add(%h, %b1)
  %a = gelu(%hb)
  %y = matmul(%a, %w2)
  %e = sub(%y, %t)
  %sq = mul(%e, %e)
  %loss = reduce_mean(%sq) {dims = [0, 1]}
  return %loss
}
"""
TRAINING_STEP = 'training-step{func=@mlp,params="w1,b1,w2",lr=0.1}'


def step_all_reduces(module):
    text = module.text()
    step = text[text.index("spmd func @mlp_step"):]
    return step.count("= all_reduce(")


def test_gradients_share_one_bucket_and_compute_the_same_bits():
    m = commir.opt(commir.parse(STEP), TRAINING_STEP)
    apart = commir.opt(m, commir.PARTITION_PIPELINE)
    combined = commir.opt(m, commir.DEFAULT_SPMD_PIPELINE)
    # Partitioned: one all_reduce per gradient (w1, b1, w2) and the loss's. Their
    # (16384 + 256 + 16384 + 1) floats, 129 KiB, fit in one 25 MiB bucket.
    assert step_all_reduces(apart) == 4
    assert step_all_reduces(combined) == 1
    assert "all_reduce(%" in combined.text() and "f32[33025]" in combined.text()
    rng = np.random.default_rng(3)
    inputs = dict(w1=rng.uniform(-1, 1, (64, 256)).astype(np.float32),
                  b1=rng.uniform(-1, 1, (256,)).astype(np.float32),
                  w2=rng.uniform(-1, 1, (256, 64)).astype(np.float32),
                  x=rng.uniform(-1, 1, (512, 64)).astype(np.float32),
                  t=rng.uniform(-1, 1, (512, 64)).astype(np.float32))
    a = commir.run(apart, func="@mlp_step", **inputs)
    c = commir.run(combined, func="@mlp_step", **inputs)
    assert len(a) == len(c) == 4
    for x, y in zip(a, c):
        np.testing.assert_array_equal(x, y)


def test_forward_tensor_parallel_all_reduces_stay():
    # Two Megatron MLP blocks: the second all_reduce reads the first's result.
    m = commir.parse("""mesh @m(tp=4)

func @f(%x: f32[8, 16], %a1: f32[16, 32@tp], %b1: f32[32@tp, 16], %a2: f32[16, 32@tp], %b2: f32[32@tp, 16]) -> f32[8, 16] {
  %h1 = matmul(%x, %a1) : f32[8, 32@tp]
  %y1 = matmul(%h1, %b1) : f32[8, 16]
  %h2 = matmul(%y1, %a2) : f32[8, 32@tp]
  %y2 = matmul(%h2, %b2) : f32[8, 16]
  return %y2
}
""")
    assert commir.opt(m, commir.DEFAULT_SPMD_PIPELINE).text().count("= all_reduce(") == 2
