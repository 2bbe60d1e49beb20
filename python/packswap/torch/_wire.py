"""How a pack (a dict of name -> tensor) travels: a schema of int64 words that every rank
all-gathers, and a byte image that moves through all_to_all_single.

A pack's schema is ``[tensor count, then per tensor: dtype code, ndim, *shape, name length,
*name words]``, the name being UTF-8 packed eight bytes to an int64 word. Its byte image is the
tensors' bytes one after the other, each starting at a multiple of ``ALIGN`` bytes, the whole
padded to a multiple of ``ALIGN``; the receiver cuts typed views out of it at the same offsets,
so nothing but the schema and the sizes needs to travel ahead of the data.
"""

import operator
from collections.abc import Mapping

import torch

ALIGN = 16

# Wire codes of the dtypes a pack may hold. Codes are fixed forever; the list only grows.
_DTYPE_NAMES = [
    "float32", "float64", "float16", "bfloat16", "uint8", "int8", "int16", "int32", "int64",
    "bool", "complex64", "complex128", "uint16", "uint32", "uint64", "float8_e4m3fn",
    "float8_e5m2",
]
DTYPE_CODE = {}
CODE_DTYPE = {}
for _code, _name in enumerate(_DTYPE_NAMES):
    _dtype = getattr(torch, _name, None)
    if isinstance(_dtype, torch.dtype):
        DTYPE_CODE[_dtype] = _code
        CODE_DTYPE[_code] = _dtype


def align(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _name_words(name):
    raw = name.encode("utf-8")
    words = [int.from_bytes(raw[i:i + 8].ljust(8, b"\0"), "little", signed=True)
             for i in range(0, len(raw), 8)]
    return len(raw), words


def _name_from(words, length):
    raw = b"".join(int(w).to_bytes(8, "little", signed=True) for w in words)
    return raw[:length].decode("utf-8")


def describe(pack, index, device, who):
    """Checks one submitted pack and returns (schema words, tensors, padded byte size).

    Raises ValueError naming the rank (`who`), the pack (its index in the submitted list), the
    key and the value for anything that cannot travel: a non-dict pack, a non-str key, a
    non-tensor value, a tensor on another device, a sparse tensor or a dtype without a wire code.
    """
    if not isinstance(pack, Mapping):
        raise ValueError(f"{who}pack {index} is a {type(pack).__name__}, expected a dict of "
                         f"name -> torch.Tensor")
    words = [len(pack)]
    tensors = []
    offset = 0
    for name, t in pack.items():
        if not isinstance(name, str):
            raise ValueError(f"{who}pack {index} has the key {name!r} ({type(name).__name__}); keys "
                             f"must be str")
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{who}pack {index} value {name!r} is a {type(t).__name__}, expected a "
                             f"torch.Tensor")
        if t.device != device:
            raise ValueError(f"{who}pack {index} tensor {name!r} is on {t.device}, this Rebalancer "
                             f"exchanges on {device}")
        if t.layout != torch.strided:
            raise ValueError(f"{who}pack {index} tensor {name!r} has layout {t.layout}; only dense "
                             f"(strided) tensors can be exchanged")
        code = DTYPE_CODE.get(t.dtype)
        if code is None:
            raise ValueError(f"{who}pack {index} tensor {name!r} has dtype {t.dtype}, which packswap "
                             f"cannot exchange (supported: "
                             f"{', '.join(str(d) for d in DTYPE_CODE)})")
        length, name_words = _name_words(name)
        words += [code, t.dim(), *t.shape, length, *name_words]
        tensors.append(t)
        offset = align(offset) + t.numel() * t.element_size()
    return words, tensors, align(offset)


def parse(words, start):
    """The pack schema at ``words[start:]``: a list of (name, dtype, shape, byte offset, nbytes)."""
    pos = start
    count = int(words[pos])
    pos += 1
    out = []
    offset = 0
    for _ in range(count):
        dtype = CODE_DTYPE.get(int(words[pos]))
        if dtype is None:
            raise ValueError(f"dtype code {int(words[pos])} is unknown here (a newer packswap on "
                             f"another rank?)")
        ndim = int(words[pos + 1])
        shape = tuple(int(x) for x in words[pos + 2:pos + 2 + ndim])
        pos += 2 + ndim
        length = int(words[pos])
        nwords = (length + 7) // 8
        name = _name_from(words[pos + 1:pos + 1 + nwords], length)
        pos += 1 + nwords
        numel = 1
        for d in shape:
            numel *= d
        nbytes = numel * torch.empty((), dtype=dtype).element_size()
        offset = align(offset)
        out.append((name, dtype, shape, offset, nbytes))
        offset += nbytes
    return out


def byte_pieces(tensors, zeros):
    """The byte image of one pack as a list of uint8 tensors (with zero padding from ``zeros``,
    a uint8 tensor of at least ALIGN zeros on the same device), for torch.cat."""
    pieces = []
    offset = 0
    for t in tensors:
        pad = align(offset) - offset
        if pad:
            pieces.append(zeros[:pad])
        n = t.numel() * t.element_size()
        if n:
            pieces.append(as_bytes(t))
        offset += pad + n
    pad = align(offset) - offset
    if pad:
        pieces.append(zeros[:pad])
    return pieces


def as_bytes(t):
    """A tensor's data as a flat uint8 tensor (a view when it is contiguous)."""
    flat = t.detach().contiguous().reshape(-1)
    if flat.dtype == torch.uint8:
        return flat
    if flat.dtype.is_complex:
        flat = torch.view_as_real(flat).reshape(-1)
    return flat.view(torch.uint8)


def rebuild(buffer, start, schema):
    """The pack whose byte image starts at ``buffer[start]``: a dict of typed views."""
    pack = {}
    for name, dtype, shape, offset, nbytes in schema:
        raw = buffer[start + offset:start + offset + nbytes]
        if dtype == torch.uint8:
            t = raw
        elif dtype.is_complex:
            real = torch.float32 if dtype == torch.complex64 else torch.float64
            t = torch.view_as_complex(raw.view(real).reshape(-1, 2))
        else:
            t = raw.view(dtype)
        pack[name] = t.reshape(shape)
    return pack


def cost_of(cost, pack, index, who):
    """The user's cost of one pack, checked to be a non-negative integer."""
    value = cost(pack)
    if isinstance(value, bool):
        raise ValueError(f"{who}the cost of pack {index} is {value!r}, expected a non-negative int")
    try:
        value = operator.index(value)
    except TypeError:
        raise ValueError(f"{who}the cost of pack {index} is {value!r} ({type(value).__name__}), "
                         f"expected a non-negative int") from None
    if value < 0 or value >= 2**62:
        raise ValueError(f"{who}the cost of pack {index} is {value}, must be in [0, 2^62)")
    return value
