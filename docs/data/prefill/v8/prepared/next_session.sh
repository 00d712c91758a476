# Prepared 2026-11-27 (fifth session) for the next GPU session: the lean inverse (#34) and pooled decode by heads (#36).
# Carry [.scratch, .whl]. About 4 minutes on an H200.
set -o pipefail
. .scratch/setup.sh > /dev/null
L16=$(python3 -c "print(','.join(['512']*16))"); L57=$(python3 -c "print(','.join(['144']*41+['143']*16))")
for v in leanB leanB168 leanG leanG168; do SUB=.scratch/$v timeout 100 python3 .scratch/check_prefill.py "[8192]" "[512]*16" "[144]*41+[143]*16" "[1,8191]" "[4096]" "[100,0,900,64,3000]" 2>&1 | grep -v "Warn\|warn_once" | sed "s/^/$v /" | tee -a $OUT/check.txt; done
for v in solution/triton .scratch/leanB .scratch/leanB168 .scratch/leanG .scratch/leanG168; do timeout 60 python3 .scratch/bd.py $v "[8192]" "[512]*16" "[144]*41+[143]*16" 2>&1 | grep -v "Warn\|warn_once" | grep "prep\|graph\|seqs\|8192\]" | sed "s#^#$v #" | tee -a $OUT/bd.txt; done
timeout 200 python3 scripts/bench_prefill.py --lengths $L16 --lengths $L57 --lengths 8192 --lengths 4096 --lengths 16384 --lengths 1,8191 --lengths 1024 --against .scratch/leanB/prefill.py --against .scratch/leanB168/prefill.py --against .scratch/leanG/prefill.py --against .scratch/leanG168/prefill.py --out $OUT/bench 2>&1 | tail -1
python3 .scratch/pdh_check.py 2>&1 | tail -16 | tee $OUT/pdh_check.txt
timeout 120 python3 .scratch/pdh_sweep.py 2>&1 | tee $OUT/pdh_sweep.txt
