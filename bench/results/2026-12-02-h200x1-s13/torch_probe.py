# SPDX-License-Identifier: MIT
# probe: handle types of PyTorch's expandable segments and of its default allocator
import ctypes, os, sys, torch
cu = ctypes.CDLL("libcuda.so.1")
def q(p):
    h = ctypes.c_ulonglong()
    r = cu.cuMemRetainAllocationHandle(ctypes.byref(h), ctypes.c_void_p(p))
    if r != 0:
        return "not cuMem (%d)" % r
    prop = (ctypes.c_ubyte * 64)()
    r2 = cu.cuMemGetAllocationPropertiesFromHandle(prop, h)
    cu.cuMemRelease(h)
    # CUmemAllocationProp: type(4) requestedHandleTypes(4) ...
    return "cuMem, requestedHandleTypes=%d (r=%d)" % (int.from_bytes(bytes(prop[4:8]), "little"), r2)
mode = sys.argv[1]
x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
y = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
print(mode, "x:", q(x.data_ptr()), "y:", q(y.data_ptr()))
