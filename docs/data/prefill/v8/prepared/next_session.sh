# Prepared 2026-11-27 (fifth session) for the next GPU session. Carry [.scratch, .whl]; about 5 minutes on an H200.
# .scratch/capped = solution/triton + docs/data/prefill/v8/prepared/lean_prep_register_cap.patch (its solution/ part);
# .scratch/lean_nocap = the same with PREP_TABLE's maxnreg left out. Rebuild them from the patch if they are gone.
set -o pipefail
. .scratch/setup.sh > /dev/null
L16=$(python3 -c "print(','.join(['512']*16))"); L57=$(python3 -c "print(','.join(['144']*41+['143']*16))")
ARGS=""
while read n t l; do ARGS="$ARGS --lengths $l"; done < <(awk '$1==3||$1==22||$1==57' .scratch/mixlens.txt | awk '!seen[$1]++')
for v in capped lean_nocap; do SUB=.scratch/$v timeout 100 python3 .scratch/check_prefill.py "[8192]" "[512]*16" "[144]*41+[143]*16" "[1,8191]" "[4096]" "[100,0,900,64,3000]" "[3]*70+[100]*30" 2>&1 | grep -v "Warn\|warn_once" | sed "s/^/$v /" | tee -a $OUT/check.txt; done
for v in solution/triton .scratch/lean_nocap .scratch/capped; do timeout 60 python3 .scratch/bd.py $v "[8192]" "[512]*16" "[144]*41+[143]*16" 2>&1 | grep -v "Warn\|warn_once" | grep "prep\|graph\|seqs\|8192\]" | sed "s#^#$v #" | tee -a $OUT/bd.txt; done
timeout 240 python3 scripts/bench_prefill.py $ARGS --lengths $L16 --lengths $L57 --lengths 8192 --lengths 4096 --lengths 16384 --lengths 1,8191 --lengths 1024 --lengths 256,256,256,256 --against .scratch/lean_nocap/prefill.py --against .scratch/capped/prefill.py --out $OUT/bench 2>&1 | tail -1
python3 .scratch/pdh_check.py 2>&1 | tail -16 | tee $OUT/pdh_check.txt
timeout 120 python3 .scratch/pdh_sweep.py 2>&1 | tee $OUT/pdh_sweep.txt
