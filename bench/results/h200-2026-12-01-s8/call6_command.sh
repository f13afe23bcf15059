export KK_COMMIT=9283dc0; O=$OUT
( CMAKE_BUILD_PARALLEL_LEVEL=8 KERNELKIT_CUDA_ARCHS=native python3 -m pip install -q --no-build-isolation --config-settings=cmake.define.KERNELKIT_CUDA_ARCHS=native . > $O/install.log 2>&1; echo "install rc $?" >> $O/install.log ) &
IP=$!
OUT=$O/t GTEST_FILTER='*Attention*:*Wgmma*:*PlannerAlternatives*' SANITIZERS="memcheck racecheck" SAN_GTEST_FILTER='*PlannerAlternatives*:*AttentionLayouts*:*WgmmaProbe*' RACE_GTEST_FILTER='*PlannerAlternatives*:*AttentionLayouts*:*AttentionFp16*' timeout 160 scripts/gpu-check --only native > $O/t.txt 2>&1
tail -6 $O/t.txt
wait $IP; tail -1 $O/install.log
(cd /tmp && timeout 25 python3 -m pytest -q $OLDPWD/tests/python/test_torch_ops.py -k "cuda_graph or attention" > $O/pytest.txt 2>&1; tail -2 $O/pytest.txt)
timeout 60 python3 bench/op_baselines.py --only attention --tuned --commit $KK_COMMIT --out $O/ob > $O/ob.log 2>&1; grep "attention |" $O/ob/op_baselines.md | cut -c1-110
cd $O && tar czf all.tgz t t.txt install.log pytest.txt ob ob.log && rm -rf t ob t.txt install.log pytest.txt ob.log
