# Shared by bench/ctr_quality.sh and bench/ctr_ab.sh (sourced): the generated data, the job with
# its data and seed, and one local run's result, so both benches measure the same way.

# ctr_bench_data BIN DIR TEACHER ROWS: writes (once) DIR/TEACHER-ROWS/{train,test,val}.tsv.gz,
# ROWS training rows (--seed 1) and ROWS/8 test (--seed 2) and validation (--seed 3) rows of the
# planted teacher, and prints that directory.
ctr_bench_data() {
  local bin="$1" dir="$2/$3-$4" teacher="$3" rows="$4" part name sample_seed count
  mkdir -p "$dir"
  for part in train:1:$rows test:2:$((rows / 8)) val:3:$((rows / 8)); do
    IFS=':' read -r name sample_seed count <<<"$part"
    [[ -f "$dir/$name.tsv.gz" ]] && continue
    "$bin/syncopate" datagen ctr --teacher="$teacher" --rows="$count" --seed="$sample_seed" \
      --out="$dir/$name.tsv.gz" | tail -n 1 >&2
  done
  echo "$dir"
}

# ctr_bench_job JOB DATA SEED OUT: JOB with its data paths set to DATA's files and `seed:` to SEED.
ctr_bench_job() {
  sed -e "s/^seed:.*/seed: $3/" \
      -e "s#train_path:.*#train_path: \"$2/train.tsv.gz\"#" \
      -e "s#test_path:.*#test_path: \"$2/test.tsv.gz\"#" \
      -e "s#validation_path:.*#validation_path: \"$2/val.tsv.gz\"#" "$1" >"$4"
}

# ctr_bench_run BIN JOB RUN_DIR: runs the job locally and prints "final kept examples_per_second"
# (kept: the version the validation set chose, or the final one without a validation set);
# returns 1 with the run's last lines on stderr when it did not finish.
ctr_bench_run() {
  local out final eps kept
  out="$(timeout 1800 "$1/syncopate" local --bin_dir="$1" --job="$2" --run_dir="$3" 2>&1 |
         grep -E '^(done|kept):' || true)"
  final="$(grep '^done:' <<<"$out" | sed -n 's/.*, AUC \([0-9.]*\),.*/\1/p' || true)"
  eps="$(grep '^done:' <<<"$out" | sed -n 's/.* (\([0-9]*\) examples\/s training[,)].*/\1/p' || true)"
  kept="$(grep '^kept:' <<<"$out" | sed -n 's/.*, AUC \([0-9.]*\),.*/\1/p' || true)"
  [[ -n "$final" && -n "$eps" ]] || { echo "$out" >&2; return 1; }
  echo "$final ${kept:-$final} $eps"
}
