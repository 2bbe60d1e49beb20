"""A vision transformer with random weights, for timing what packswap's cost model prices.

The encoder runs one pack at a time: the patches of all the pack's images, concatenated into one
sequence of T tokens (no padding, no batch dimension), with attention restricted to each image.
That restriction is done by a variable-length attention kernel over the images' cumulative
lengths where one is available (FlashAttention's ``flash_attn_varlen_func``, torch's
``torch.nn.attention.varlen.varlen_attn``, or SDPA over a jagged nested tensor), else by one
attention call per image. Never by a dense mask over the whole pack: that would cost T^2 where the
encoder costs the sum over images of n^2, which is what the cost model's ``vit_attention`` term
prices.

One image token is one ViT patch of ``patch x patch`` pixels (as in LLaVA's ViT-L/14 and SigLIP
So400m, which feed their patches to the language model one to one). Positions are 2D rotary: each
image's tokens lie on a ``rows x cols`` grid (``grid_of``), half of every head's channels rotate
with the row, half with the column, so attention sees relative positions inside an image.

Works on torch 1.13 (CPU, float32: the per-image path, with attention written out) and on
torch 2.x with CUDA (bf16, the variable-length kernels).

    layout = PackLayout([576, 1024, 144], device="cuda")
    model = VisionEncoder(SHAPES["vit-l14"], "varlen", device="cuda", dtype=torch.bfloat16)
    out = model(random_pixels(layout, model.shape, torch.bfloat16), layout)  # (1744, 1024)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class VitShape:
    """The sizes of an encoder: ``layers`` pre-norm transformer blocks of width ``hidden``."""

    name: str
    layers: int
    hidden: int
    heads: int
    mlp: int
    patch: int = 14
    channels: int = 3
    title: str = ""  # what it is like, for reports

    def __post_init__(self) -> None:
        if self.layers < 1 or self.heads < 1 or self.mlp < 1 or self.patch < 1:
            raise ValueError(f"encoder shape {self}: every size must be >= 1")
        if self.hidden % self.heads != 0 or (self.hidden // self.heads) % 4 != 0:
            raise ValueError(
                f"encoder shape '{self.name}': hidden {self.hidden} / heads {self.heads} must be "
                "a whole head size divisible by 4 (2D rotary rotates pairs along two axes)")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def patch_pixels(self) -> int:
        """Values in one flattened patch: channels x patch x patch."""
        return self.channels * self.patch * self.patch

    def parameter_count(self) -> int:
        h, m = self.hidden, self.mlp
        block = 2 * 2 * h + (3 * h * h + 3 * h) + (h * h + h) + (h * m + m) + (m * h + h)
        return (self.patch_pixels * h + h) + self.layers * block + 2 * h

    def describe(self) -> str:
        return (f"{self.layers} layers, hidden {self.hidden}, {self.heads} heads, "
                f"MLP {self.mlp}, {self.patch}-pixel patches")

    def entry(self, attention: str) -> dict:
        """What a timing file records of an encoder of this shape."""
        return {"shape": {"layers": self.layers, "hidden": self.hidden, "heads": self.heads,
                          "mlp": self.mlp, "patch": self.patch},
                "title": self.title, "description": self.describe(), "attention": attention,
                "parameters": self.parameter_count()}


SHAPES: Dict[str, VitShape] = {
    # ViT-L/14 (CLIP, LLaVA's encoder)
    "vit-l14": VitShape("vit-l14", layers=24, hidden=1024, heads=16, mlp=4096,
                        title="ViT-L/14-like"),
    # SigLIP So400m/14 (PaliGemma, Idefics)
    "so400m": VitShape("so400m", layers=27, hidden=1152, heads=16, mlp=4304,
                       title="So400m-like"),
    # for tests and CPU smoke runs only
    "tiny": VitShape("tiny", layers=2, hidden=32, heads=4, mlp=64, patch=2, title="tiny"),
}


def grid_of(tokens: int) -> Tuple[int, int]:
    """The most nearly square ``rows x cols`` grid of exactly ``tokens`` patches, rows <= cols.

    The cost model knows only an image's token count; any grid with that count costs the same.
    """
    if tokens < 1:
        raise ValueError(f"an image has {tokens} tokens, must be >= 1")
    rows = math.isqrt(tokens)
    while tokens % rows != 0:
        rows -= 1
    return rows, tokens // rows


class PackLayout:
    """Where each image of a pack lies in the pack's token sequence.

    ``images`` lists the token count of each image, in sequence order (each >= 1). Holds the
    cumulative lengths as an int32 tensor on ``device`` (what the variable-length kernels read),
    the longest image, and each token's (row, column) on its image's grid.
    """

    def __init__(self, images: Sequence[int], device: "torch.device | str" = "cpu") -> None:
        self.lengths: List[int] = [int(n) for n in images]
        if not self.lengths:
            raise ValueError("a pack without images does not run the encoder")
        for i, n in enumerate(self.lengths):
            if n < 1:
                raise ValueError(f"image {i} has {n} tokens, must be >= 1")
        self.device = torch.device(device)
        self.tokens = sum(self.lengths)
        self.max_len = max(self.lengths)
        bounds = [0]
        for n in self.lengths:
            bounds.append(bounds[-1] + n)
        self.bounds = bounds
        self.cu_seqlens = torch.tensor(bounds, dtype=torch.int32).to(self.device)
        rows, cols = [], []
        for n in self.lengths:
            _, width = grid_of(n)
            index = torch.arange(n)
            rows.append(torch.div(index, width, rounding_mode="floor"))
            cols.append(index % width)
        self.rows = torch.cat(rows).to(self.device)
        self.cols = torch.cat(cols).to(self.device)

    def slices(self) -> List[slice]:
        """One slice of the token sequence per image."""
        return [slice(a, b) for a, b in zip(self.bounds[:-1], self.bounds[1:])]


def rotary_tables(layout: PackLayout, head_dim: int, dtype: torch.dtype,
                  base: float = 10000.0) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of every token's rotation angles, shaped (T, 1, head_dim / 2).

    The first half of the angles follow the token's row, the second half its column, each with
    the usual geometric frequencies.
    """
    pairs = head_dim // 4  # rotated pairs per axis
    exponent = torch.arange(pairs, dtype=torch.float64, device=layout.device) / pairs
    inv_freq = base ** (-exponent)
    angles = torch.cat([layout.rows[:, None].double() * inv_freq[None, :],
                        layout.cols[:, None].double() * inv_freq[None, :]], dim=1)
    return angles.cos().to(dtype)[:, None, :], angles.sin().to(dtype)[:, None, :]


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotates channel i with channel i + D/2 of x (T, H, D) by the angles of ``rotary_tables``."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


# ---- attention restricted to each image -------------------------------------------------------
#
# Every backend maps q, k, v of shape (T, H, D) and a PackLayout to the output (T, H, D), where
# token t attends only to the tokens of its own image.

AttentionFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, PackLayout], torch.Tensor]


def _dense_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Full attention within one sequence, (n, H, D) -> (n, H, D)."""
    qh, kh, vh = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
    if hasattr(F, "scaled_dot_product_attention"):
        out = F.scaled_dot_product_attention(qh, kh, vh)
    else:  # torch 1.13: written out, softmax in at least float32
        scores = torch.matmul(qh, kh.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
        wide = torch.promote_types(scores.dtype, torch.float32)
        out = torch.matmul(torch.softmax(scores.to(wide), dim=-1).to(q.dtype), vh)
    return out.transpose(0, 1)


def attention_per_image(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        layout: PackLayout) -> torch.Tensor:
    """One attention call per image: correct everywhere, one kernel launch per image and layer."""
    return torch.cat([_dense_attention(q[s], k[s], v[s]) for s in layout.slices()], dim=0)


def attention_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     layout: PackLayout) -> torch.Tensor:
    """torch.nn.attention.varlen.varlen_attn (torch >= 2.10, CUDA, fp16/bf16)."""
    from torch.nn.attention.varlen import varlen_attn

    cu = layout.cu_seqlens
    return varlen_attn(q, k, v, cu, cu, layout.max_len, layout.max_len)


def attention_flash_attn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         layout: PackLayout) -> torch.Tensor:
    """FlashAttention's flash_attn_varlen_func (the flash-attn package, CUDA, fp16/bf16)."""
    from flash_attn import flash_attn_varlen_func

    cu = layout.cu_seqlens
    return flash_attn_varlen_func(q, k, v, cu, cu, layout.max_len, layout.max_len)


def attention_nested(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     layout: PackLayout) -> torch.Tensor:
    """SDPA over jagged nested tensors, one sequence per image (torch >= 2.5)."""
    offsets = layout.cu_seqlens.long()

    def jagged(x: torch.Tensor) -> torch.Tensor:
        # (B, j, H, D) -> (B, H, j, D); passing the lengths' bounds spares a device sync.
        try:
            n = torch.nested.nested_tensor_from_jagged(
                x, offsets, min_seqlen=min(layout.lengths), max_seqlen=layout.max_len)
        except TypeError:
            n = torch.nested.nested_tensor_from_jagged(x, offsets)
        return n.transpose(1, 2)

    out = F.scaled_dot_product_attention(jagged(q), jagged(k), jagged(v))
    return out.transpose(1, 2).values()


ATTENTION: Dict[str, AttentionFn] = {
    "flash_attn": attention_flash_attn,
    "varlen": attention_varlen,
    "nested": attention_nested,
    "per_image": attention_per_image,
}
"""The backends, in the order ``choose_attention`` tries them."""


def attention_available(name: str, device: torch.device, dtype: torch.dtype) -> bool:
    """Whether backend ``name`` can run here at all (before it is checked numerically)."""
    if name == "per_image":
        return True
    if name in ("flash_attn", "varlen"):
        if device.type != "cuda" or dtype not in (torch.float16, torch.bfloat16):
            return False
        module = "flash_attn" if name == "flash_attn" else "torch.nn.attention.varlen"
        try:
            __import__(module)
        except Exception:  # not installed, or built for another torch
            return False
        return True
    if name == "nested":
        return (hasattr(F, "scaled_dot_product_attention")
                and hasattr(torch, "nested")
                and hasattr(torch.nested, "nested_tensor_from_jagged"))
    raise ValueError(f"unknown attention backend '{name}' (known: {', '.join(ATTENTION)})")


def check_attention(fn: AttentionFn, device: torch.device, dtype: torch.dtype,
                    images: Sequence[int] = (100, 37, 260, 1), heads: int = 4,
                    head_dim: int = 64, seed: int = 0) -> float:
    """The largest difference between ``fn`` and the per-image reference (computed in float32 on
    the same inputs), over the output and the gradient of q, k and v, relative to each
    tensor's largest magnitude. Raises whatever ``fn`` raises."""
    gen = torch.Generator().manual_seed(seed)
    layout = PackLayout(images, device)
    # q, k, v as views of one (T, 3, H, D) tensor, strided as the encoder's blocks make them
    base = torch.randn((layout.tokens, 3, heads, head_dim), generator=gen)
    grad = torch.randn((layout.tokens, heads, head_dim), generator=gen)
    results = []
    for impl, dt in ((fn, dtype), (attention_per_image, torch.float32)):
        qkv = base.to(device, dt).requires_grad_(True)
        out = impl(*qkv.unbind(1), layout)
        out.backward(grad.to(device, out.dtype))
        results.append([out.detach().float().cpu(), qkv.grad.float().cpu()])
    worst = 0.0
    for got, want in zip(*results):
        scale = max(want.abs().max().item(), 1e-6)
        worst = max(worst, (got - want).abs().max().item() / scale)
    return worst


def choose_attention(device: torch.device, dtype: torch.dtype, head_dim: int,
                     prefer: Optional[str] = None, tolerance: Optional[float] = None,
                     log: Callable[[str], None] = lambda s: None) -> str:
    """The first backend (``ATTENTION``'s order, or only ``prefer``) that runs here and matches
    the per-image reference on a small pack, forward and backward, within ``tolerance``
    (default: 5e-2 in fp16/bf16, where rounding the inputs alone moves the gradients by about 1%,
    and 1e-4 in float32; attention that crosses images is off by far more, see the tests). Logs
    what it tried and why it passed over."""
    if tolerance is None:
        tolerance = 5e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4
    names = [prefer] if prefer else list(ATTENTION)
    for name in names:
        if name not in ATTENTION:
            raise ValueError(f"unknown attention backend '{name}' (known: {', '.join(ATTENTION)})")
        if not attention_available(name, device, dtype):
            log(f"attention '{name}': not available here")
            continue
        try:
            err = check_attention(ATTENTION[name], device, dtype, head_dim=head_dim)
        except Exception as e:  # a kernel that rejects this device, dtype or head size
            log(f"attention '{name}': failed its check: {type(e).__name__}: {e}")
            continue
        if err > tolerance:
            log(f"attention '{name}': differs from per-image attention by {err:.3g} "
                f"(tolerance {tolerance:g})")
            continue
        log(f"attention '{name}': matches per-image attention within {err:.3g}")
        return name
    raise RuntimeError(f"no attention backend works on {device} in {dtype}"
                       + (f" (asked for '{prefer}')" if prefer else ""))


# ---- the encoder --------------------------------------------------------------------------------


class Block(nn.Module):
    """Pre-norm transformer block: attention within each image, then a GELU MLP."""

    def __init__(self, shape: VitShape, **factory) -> None:
        super().__init__()
        h = shape.hidden
        self.heads = shape.heads
        self.norm1 = nn.LayerNorm(h, eps=1e-6, **factory)
        self.qkv = nn.Linear(h, 3 * h, **factory)
        self.proj = nn.Linear(h, h, **factory)
        self.norm2 = nn.LayerNorm(h, eps=1e-6, **factory)
        self.fc1 = nn.Linear(h, shape.mlp, **factory)
        self.fc2 = nn.Linear(shape.mlp, h, **factory)

    def forward(self, x: torch.Tensor, layout: PackLayout, rope: Tuple[torch.Tensor, torch.Tensor],
                attend: AttentionFn) -> torch.Tensor:
        t, h = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(t, 3, self.heads, h // self.heads).unbind(1)
        q, k = apply_rotary(q, *rope), apply_rotary(k, *rope)
        x = x + self.proj(attend(q, k, v, layout).reshape(t, h))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x)), approximate="tanh"))


class VisionEncoder(nn.Module):
    """Patch embedding, ``shape.layers`` blocks and a final norm, over one pack at a time.

    ``forward(pixels, layout)`` takes the pack's flattened patches, (T, channels * patch^2), and
    returns one vector per patch, (T, hidden). The patch embedding is a linear map of each
    flattened patch, which is what a stride-``patch`` convolution computes.
    """

    def __init__(self, shape: VitShape, attention: str = "per_image", seed: int = 0,
                 device: "torch.device | str | None" = None,
                 dtype: Optional[torch.dtype] = None) -> None:
        super().__init__()
        if attention not in ATTENTION:
            raise ValueError(f"unknown attention backend '{attention}' "
                             f"(known: {', '.join(ATTENTION)})")
        self.shape = shape
        self.attention = attention
        # Built on its device, in its dtype: no copy of the weights through host memory.
        factory = {"device": device, "dtype": dtype}
        dev = torch.device(device) if device is not None else torch.device("cpu")
        cuda = [dev.index if dev.index is not None else torch.cuda.current_device()] \
            if dev.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):
            torch.manual_seed(seed)
            self.patch_embed = nn.Linear(shape.patch_pixels, shape.hidden, **factory)
            self.blocks = nn.ModuleList(Block(shape, **factory) for _ in range(shape.layers))
            self.norm = nn.LayerNorm(shape.hidden, eps=1e-6, **factory)
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, std=0.02)
                    nn.init.zeros_(m.bias)

    def forward(self, pixels: torch.Tensor, layout: PackLayout) -> torch.Tensor:
        if pixels.shape != (layout.tokens, self.shape.patch_pixels):
            raise ValueError(f"pixels are {tuple(pixels.shape)}, the pack needs "
                             f"({layout.tokens}, {self.shape.patch_pixels})")
        rope = rotary_tables(layout, self.shape.head_dim, pixels.dtype)
        attend = ATTENTION[self.attention]
        x = self.patch_embed(pixels)
        for block in self.blocks:
            x = block(x, layout, rope, attend)
        return self.norm(x)


def random_pixels(layout: PackLayout, shape: VitShape, dtype: torch.dtype) -> torch.Tensor:
    """Synthetic flattened patches for a pack, on the layout's device (torch's default
    generator of that device)."""
    return torch.randn((layout.tokens, shape.patch_pixels), device=layout.device).to(dtype)
