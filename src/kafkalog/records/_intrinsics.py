"""LLVM intrinsics through which the numba kernels touch memory by raw address: load, memcpy, prefetch.

Invariant: none of these checks anything. A caller reads ``_load_u8(mem, p)`` only at ``0 <= p < limit``
for a ``limit <= len(buffer)`` its Python wrapper has checked, copies with ``_memcpy`` only ranges it has
checked on both sides, and prefetches only addresses inside the buffer (a prefetch never faults, but the
kernels keep to the rule anyway). :mod:`kafkalog.records._kernels` states the bounds discipline its parsers
follow.

Why raw addresses (``arr.ctypes.data``) rather than arrays: passing arrays into numba helpers made numba
emit atomic reference-count calls in the record loop (17% of the decode time, seen with ``perf``).
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir  # type: ignore[import-untyped]
from numba import types
from numba.extending import intrinsic

_I8P = ir.IntType(8).as_pointer()


def _address(builder: Any, value: Any) -> Any:
    return builder.inttoptr(value, _I8P)


def _load_u8_typer(typingctx: Any, mem: Any, i: Any) -> Any:
    """``*(uint8 *)(mem + i)``: no bounds check, callers check ``0 <= i < limit <= len``."""
    sig = types.uint8(types.uintp, types.intp)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.load(builder.gep(_address(builder, args[0]), [args[1]]))

    return sig, codegen


_load_u8: Any = intrinsic(_load_u8_typer)


def _memcpy_typer(typingctx: Any, dst: Any, src: Any, n: Any) -> Any:
    """``llvm.memcpy((void *)dst, (void *)src, n)`` on addresses: callers check both ranges first."""
    sig = types.void(types.uintp, types.uintp, types.intp)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(ir.VoidType(), [_I8P, _I8P, i64, ir.IntType(1)])
        fn = builder.module.declare_intrinsic("llvm.memcpy", [_I8P, _I8P, i64], fnty)
        dst_p, src_p = _address(builder, args[0]), _address(builder, args[1])
        builder.call(fn, [dst_p, src_p, args[2], ir.Constant(ir.IntType(1), 0)])
        return context.get_dummy_value()

    return sig, codegen


_memcpy: Any = intrinsic(_memcpy_typer)


def _prefetch_typer(typingctx: Any, mem: Any) -> Any:
    """``llvm.prefetch((void *)mem)`` for reading: a hint that never faults (callers stay in bounds anyway)."""
    sig = types.void(types.uintp)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [_I8P, i32, i32, i32])
        fn = builder.module.declare_intrinsic("llvm.prefetch", [_I8P], fnty)
        one, two, zero = ir.Constant(i32, 1), ir.Constant(i32, 2), ir.Constant(i32, 0)
        builder.call(fn, [_address(builder, args[0]), zero, two, one])
        return context.get_dummy_value()

    return sig, codegen


_prefetch: Any = intrinsic(_prefetch_typer)
