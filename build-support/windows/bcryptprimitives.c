/* bcryptprimitives.dll for wine: Rust's standard library (1.78 and later)
 * takes its random numbers from ProcessPrng in bcryptprimitives.dll, which
 * wine 8 does not provide, so every Rust program and library would fail to
 * start under it (c0000135). This stand-in forwards to RtlGenRandom
 * (SystemFunction036 in advapi32). For testing under wine only; Windows has
 * the real library. Built by scripts/test-windows with
 * x86_64-w64-mingw32-gcc -shared -o bcryptprimitives.dll bcryptprimitives.c -ladvapi32 */
#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk)) return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
