"""The vision encoder that bench/vit times: attention stays inside each image, positions, shapes.

Runs on the CPU in float32 with tiny shapes (torch 1.13 here: the per-image attention path; the
variable-length kernels are checked the same way wherever torch can run them, and on the GPU by
vit_time.py before it times anything).
"""

import pathlib
import sys

import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench" / "vit"))
import vit_model as vm  # noqa: E402

CPU = torch.device("cpu")


def block_diagonal_reference(q, k, v, lengths):
    """Attention over the whole pack with a dense block-diagonal mask: the definition the
    encoder must match (and what it must never compute, at T^2 cost)."""
    t = q.shape[0]
    image = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    mask = image[:, None] == image[None, :]
    qh, kh, vh = (x.transpose(0, 1) for x in (q, k, v))
    scores = qh @ kh.transpose(-1, -2) * q.shape[-1] ** -0.5
    scores = scores.masked_fill(~mask, float("-inf"))
    assert scores.shape == (q.shape[1], t, t)
    return (torch.softmax(scores, dim=-1) @ vh).transpose(0, 1)


def random_layouts(count, seed):
    gen = torch.Generator().manual_seed(seed)
    for _ in range(count):
        n = int(torch.randint(1, 7, (1,), generator=gen))
        lengths = [int(x) for x in torch.randint(1, 40, (n,), generator=gen)]
        if int(torch.randint(0, 3, (1,), generator=gen)) == 0:
            lengths[0] = 1  # one-token images are images too
        yield lengths


def backends_here():
    return [name for name in vm.ATTENTION
            if vm.attention_available(name, CPU, torch.float64)]


def test_attention_within_each_image_equals_a_block_diagonal_mask_over_the_pack():
    gen = torch.Generator().manual_seed(1)
    backends = backends_here()
    assert "per_image" in backends
    for lengths in random_layouts(60, 2):
        layout = vm.PackLayout(lengths, CPU)
        q, k, v = (torch.randn((layout.tokens, 3, 8), generator=gen, dtype=torch.float64)
                   for _ in range(3))
        g = torch.randn((layout.tokens, 3, 8), generator=gen, dtype=torch.float64)
        want_inputs = [x.clone().requires_grad_(True) for x in (q, k, v)]
        want = block_diagonal_reference(*want_inputs, lengths)
        want.backward(g)
        for name in backends:
            inputs = [x.clone().requires_grad_(True) for x in (q, k, v)]
            got = vm.ATTENTION[name](*inputs, layout)
            got.backward(g)
            assert torch.allclose(got, want, atol=1e-10), (name, lengths)
            for a, b in zip(inputs, want_inputs):
                assert torch.allclose(a.grad, b.grad, atol=1e-10), (name, lengths)


def test_no_token_of_the_encoder_sees_another_image():
    torch.manual_seed(3)
    shape = vm.SHAPES["tiny"]
    model = vm.VisionEncoder(shape, seed=4).double()
    layout = vm.PackLayout([7, 1, 12, 5], CPU)
    pixels = vm.random_pixels(layout, shape, torch.float64)
    out = model(pixels, layout)
    for j, sl in enumerate(layout.slices()):
        changed = pixels.clone()
        changed[sl] += 1.0
        out2 = model(changed, layout)
        for i, other in enumerate(layout.slices()):
            if i == j:
                assert not torch.allclose(out2[other], out[other])
            else:
                assert torch.equal(out2[other], out[other]), (i, j)
    # and the gradient of one image's outputs reaches only that image's pixels
    x = pixels.clone().requires_grad_(True)
    model(x, layout)[layout.slices()[2]].sum().backward()
    for i, sl in enumerate(layout.slices()):
        assert (x.grad[sl].abs().sum() > 0) == (i == 2)


def test_a_backend_that_attends_across_images_fails_the_check_that_picks_backends():
    def whole_pack(q, k, v, layout):
        return vm.attention_per_image(q, k, v, vm.PackLayout([layout.tokens], q.device))

    def boundary_off_by_one(q, k, v, layout):
        lengths = list(layout.lengths)
        lengths[0], lengths[1] = lengths[0] - 1, lengths[1] + 1
        return vm.attention_per_image(q, k, v, vm.PackLayout(lengths, q.device))

    assert vm.check_attention(vm.attention_per_image, CPU, torch.float32) == 0.0
    # bf16 rounding stays far inside the bf16 tolerance (5e-2); mistakes land far outside it
    assert vm.check_attention(vm.attention_per_image, CPU, torch.bfloat16) < 0.01
    assert vm.check_attention(whole_pack, CPU, torch.float32) > 0.5
    assert vm.check_attention(boundary_off_by_one, CPU, torch.float32) > 0.25


def test_choose_attention_takes_the_first_backend_that_runs_and_matches():
    tried = []
    name = vm.choose_attention(CPU, torch.float32, head_dim=8, log=tried.append)
    assert name in backends_here()
    assert len(tried) == list(vm.ATTENTION).index(name) + 1
    assert "matches per-image attention" in tried[-1]
    with pytest.raises(RuntimeError, match="no attention backend works"):
        vm.choose_attention(CPU, torch.float32, head_dim=8, prefer="flash_attn")
    with pytest.raises(ValueError, match="unknown attention backend 'dense'"):
        vm.choose_attention(CPU, torch.float32, head_dim=8, prefer="dense")


def test_rotary_positions_keep_norms_and_score_only_relative_offsets():
    gen = torch.Generator().manual_seed(5)
    layout = vm.PackLayout([12, 12], CPU)  # two 3 x 4 grids
    cos, sin = vm.rotary_tables(layout, 16, torch.float64)
    x = torch.randn((24, 2, 16), generator=gen, dtype=torch.float64)
    assert torch.allclose(vm.apply_rotary(x, cos, sin).norm(dim=-1), x.norm(dim=-1))
    # q at (r, c) against k at (r + dr, c + dc): the same score wherever the pair sits
    q = torch.randn(16, generator=gen, dtype=torch.float64).expand(24, 1, 16)
    k = torch.randn(16, generator=gen, dtype=torch.float64).expand(24, 1, 16)
    qr, kr = vm.apply_rotary(q, cos, sin)[:, 0], vm.apply_rotary(k, cos, sin)[:, 0]
    rows, cols = layout.rows.tolist(), layout.cols.tolist()
    by_offset = {}
    for a in range(12):
        for b in range(12):
            off = (rows[b] - rows[a], cols[b] - cols[a])
            by_offset.setdefault(off, []).append(float(qr[a] @ kr[b]))
    assert len(by_offset) > 10
    for scores in by_offset.values():
        assert max(scores) - min(scores) < 1e-9
    # the second image's positions start again at (0, 0)
    assert rows[12:] == rows[:12] and cols[12:] == cols[:12]


def test_grids_are_the_most_nearly_square_factorisation():
    for n in list(range(1, 400)) + [4096, 8100, 8191]:
        r, c = vm.grid_of(n)
        assert r * c == n and r <= c
        assert all(n % d != 0 for d in range(r + 1, int(n ** 0.5) + 1))
    with pytest.raises(ValueError, match="image has 0 tokens"):
        vm.grid_of(0)


def test_the_two_shapes_are_the_named_encoders_and_count_their_parameters():
    vitl, so = vm.SHAPES["vit-l14"], vm.SHAPES["so400m"]
    assert (vitl.layers, vitl.hidden, vitl.heads, vitl.mlp, vitl.patch) == (24, 1024, 16, 4096, 14)
    assert (so.layers, so.hidden, so.heads, so.mlp, so.patch) == (27, 1152, 16, 4304, 14)
    assert vitl.head_dim == 64 and so.head_dim == 72
    assert 300e6 < vitl.parameter_count() < 305e6 and 410e6 < so.parameter_count() < 415e6
    tiny = vm.SHAPES["tiny"]
    model = vm.VisionEncoder(tiny)
    assert sum(p.numel() for p in model.parameters()) == tiny.parameter_count()
    with pytest.raises(ValueError, match="divisible by 4"):
        vm.VitShape("odd", layers=1, hidden=24, heads=4, mlp=8)


def test_forward_and_backward_reach_every_parameter_and_reject_wrong_input():
    shape = vm.SHAPES["tiny"]
    model = vm.VisionEncoder(shape, seed=6)
    layout = vm.PackLayout([9, 30, 1], CPU)
    out = model(vm.random_pixels(layout, shape, torch.float32), layout)
    assert out.shape == (40, shape.hidden)
    out.square().mean().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    with pytest.raises(ValueError, match=r"pixels are \(40, 11\), the pack needs \(40, 12\)"):
        model(torch.zeros(40, 11), layout)
    with pytest.raises(ValueError, match="does not run the encoder"):
        vm.PackLayout([], CPU)
    with pytest.raises(ValueError, match="image 1 has 0 tokens"):
        vm.PackLayout([3, 0], CPU)
    # same seed, same weights
    again = vm.VisionEncoder(shape, seed=6)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters()))
