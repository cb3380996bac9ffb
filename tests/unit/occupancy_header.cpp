// Host program for tests/unit/test_occupancy_header.py: cuda_occupancy.h's own answer per point.
#include <cstdio>
#include <cuda_occupancy.h>
// argv[1]: a file of lines: cc_major cc_minor max_threads_per_sm regs_per_sm regs_per_block smem_per_sm smem_optin reserved regs threads smem_static smem_dynamic carveout_pct
// (carveout_pct: cudaOccDeviceState.carveoutConfig, -1 for the default preference)
// stdout per line: blocks limiting_factors regs_limit smem_limit warps_limit blocks_limit (or "error N")
int main(int argc, char **argv) {
    if (argc != 2) return 2;
    std::FILE *in = std::fopen(argv[1], "r");
    if (!in) return 2;
    int maj, min, tpsm, rsm, rpb, regs, threads, pct;
    size_t smsm, optin, reserved, sstatic, sdyn;
    while (std::fscanf(in, "%d %d %d %d %d %zu %zu %zu %d %d %zu %zu %d", &maj, &min, &tpsm, &rsm, &rpb, &smsm, &optin,
                      &reserved, &regs, &threads, &sstatic, &sdyn, &pct) == 13) {
        cudaOccDeviceProp p;
        p.computeMajor = maj; p.computeMinor = min; p.maxThreadsPerBlock = 1024;
        p.maxThreadsPerMultiprocessor = tpsm; p.regsPerBlock = rpb; p.regsPerMultiprocessor = rsm;
        p.warpSize = 32; p.sharedMemPerBlock = 49152; p.sharedMemPerMultiprocessor = smsm; p.numSms = 1;
        p.sharedMemPerBlockOptin = optin; p.reservedSharedMemPerBlock = reserved;
        cudaOccFuncAttributes a;
        a.maxThreadsPerBlock = 1024; a.numRegs = regs; a.sharedSizeBytes = sstatic;
        a.partitionedGCConfig = PARTITIONED_GC_OFF; a.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
        a.maxDynamicSharedSizeBytes = optin > sstatic ? optin - sstatic : 0;
        a.numBlockBarriers = 1; a.virtualResourceCount = 0;
        cudaOccDeviceState s;
        s.carveoutConfig = pct;
        cudaOccResult r;
        cudaOccError e = cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &s, threads, sdyn);
        if (e != CUDA_OCC_SUCCESS) { std::printf("error %d\n", (int)e); continue; }
        std::printf("%d %u %d %d %d %d\n", r.activeBlocksPerMultiprocessor, r.limitingFactors, r.blockLimitRegs,
                    r.blockLimitSharedMem, r.blockLimitWarps, r.blockLimitBlocks);
    }
    return 0;
}
