#!/usr/bin/env bash
# Mutation testing: plants one plausible bug at a time (tests/mutations.txt) in a scratch copy of
# the source tree, rebuilds and runs the test suite; a mutation the tests do not notice survived.
#
#   scripts/mutate.sh                    every mutation; exit 1 if the score is below --min-score
#   scripts/mutate.sh --only ID[,ID]     just these (while writing a test that should kill one)
#   scripts/mutate.sh --list             ids, files and bugs, and whether each still applies
#   scripts/mutate.sh --json             the results as JSON on stdout (progress on stderr)
#
# The scratch copy (git-tracked files as they are in the working tree, uncommitted edits
# included; untracked files are left out) goes to a fresh directory under ${TMPDIR:-/tmp},
# removed on exit, or to --workdir DIR, kept and reused (only changed files are copied again, so
# a rerun rebuilds incrementally). The user's tree is only read. It is configured once (Release,
# Ninja, CTWIN_WERROR=ON as CI builds, ccache as compiler launcher when installed, so restoring a
# mutated file is a cache hit; realrun's CUDA backend only where a GPU runs its tests or a
# mutation lies in CUDA-only code) and built once; the suite must pass there before any mutation
# is tried.
#
# For each mutation: the original text must occur exactly once in its file, else the mutation is
# STALE (the code changed; update tests/mutations.txt). It is applied, and the test executables
# are rebuilt incrementally and run one at a time (doctest --abort-after=1), the mutated
# module's own first, each under a timeout; the first failure kills the mutant (a hang counts,
# as a timeout). The other modules' test cases in the doctest suite "slow" (seconds each: whole
# CLI runs, RSS measurements) run only after every executable's quick cases have passed: the same
# cases run for a surviving mutant, and a mutant a quick case kills never waits for them. A mutant that does not compile is NOBUILD: neither killed nor survived. The file
# is then restored. Score = killed / (killed + survived). Exit status 1 when the score is below
# --min-score (default 0.90), or when any mutation is stale or does not compile; 2 on a usage
# error or when the unmutated tree does not build or pass.
#
# Killer hints (tests/mutation-killers.txt, "ID<TAB>EXECUTABLE<TAB>TEST CASE" a line): the case that
# killed a mutation last time runs first, alone (doctest -tc); if it fails the mutant is killed,
# else the whole order above runs as without a hint. A hint only changes how soon a mutant dies,
# never the verdict, so a stale hint costs one extra test run. `--record-killers` writes this
# run's killers into the hint file (merged by id, under a lock, so shards can share it).
#
# Format of the mutation list: blocks separated by blank lines; '#' starts a comment line.
#   id: zero-1-shards-optimizer        unique name
#   file: workloads/src/memory.cpp     path from the repository root
#   bug: ZeRO-1 no longer shards ...   the plausible bug, one line
#   - original text                    one or more lines; the text after "- " (or nothing, for a
#   + replacement text                 line "-" alone) joined by newlines; may be part of a line
set -uo pipefail
shopt -u patsub_replacement 2>/dev/null || true

root=$(cd "$(dirname "$0")/.." && pwd)
list_file=tests/mutations.txt
only=""
shard=""
json=0
list_only=0
min_score=0.90
jobs=$(nproc 2>/dev/null || echo 2)
workdir=""
timeout_s=""
verbose=0
doctest_filter=()
hints_file=tests/mutation-killers.txt
record_killers=0

usage() {
  sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  cat <<'EOF'
Options:
  --only ID[,ID...]   run only these mutations
  --shard K/N         run every N-th mutation from the K-th (N parallel runs, own --workdir each)
  --list              list the mutations (and check that each still applies); builds nothing
  --json              print results as JSON on stdout
  --min-score X       fail below this score (default 0.90)
  --file PATH         mutation list (default tests/mutations.txt)
  --jobs N            build jobs (default: nproc)
  --workdir DIR       keep the scratch tree and build in DIR and reuse them on the next run
  --timeout S         seconds per test executable (default: 10x its unmutated time, at least 60)
  --source-file GLOB  run only the test cases of matching test files (doctest -sf), to see
                      whether one file's tests kill a mutant: --source-file '*test_presets.cpp'
  --verbose           show build and test output of failures
  --hints FILE        killer hints (default tests/mutation-killers.txt; 'none' for no hints)
  --record-killers    write this run's killers into the hint file
EOF
}

while [[ $# -gt 0 ]]; do
  case $1 in
    --only) only=${2:?--only needs ids}; shift 2 ;;
    --only=*) only=${1#*=}; shift ;;
    --shard) shard=${2:?--shard needs K/N}; shift 2 ;;
    --shard=*) shard=${1#*=}; shift ;;
    --list) list_only=1; shift ;;
    --json) json=1; shift ;;
    --min-score) min_score=${2:?--min-score needs a number}; shift 2 ;;
    --min-score=*) min_score=${1#*=}; shift ;;
    --file) list_file=${2:?--file needs a path}; shift 2 ;;
    --file=*) list_file=${1#*=}; shift ;;
    --jobs | -j) jobs=${2:?--jobs needs a number}; shift 2 ;;
    --jobs=*) jobs=${1#*=}; shift ;;
    --workdir) workdir=${2:?--workdir needs a directory}; shift 2 ;;
    --workdir=*) workdir=${1#*=}; shift ;;
    --timeout) timeout_s=${2:?--timeout needs seconds}; shift 2 ;;
    --timeout=*) timeout_s=${1#*=}; shift ;;
    --source-file) doctest_filter=("--source-file=${2:?--source-file needs a pattern}"); shift 2 ;;
    --source-file=*) doctest_filter=("--source-file=${1#*=}"); shift ;;
    --hints) hints_file=${2:?--hints needs a file}; shift 2 ;;
    --hints=*) hints_file=${1#*=}; shift ;;
    --record-killers) record_killers=1; shift ;;
    --verbose | -v) verbose=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "mutate: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if ! [[ $min_score =~ ^[0-9]*\.?[0-9]+$ ]] || awk -v s="$min_score" 'BEGIN { exit !(s > 1) }'; then
  echo "mutate: --min-score wants a number from 0 to 1, got '$min_score'" >&2
  exit 2
fi
[[ $list_file = /* ]] || list_file=$root/$list_file
[[ -f $list_file ]] || { echo "mutate: no mutation list at $list_file" >&2; exit 2; }
[[ $hints_file == none || $hints_file = /* ]] || hints_file=$root/$hints_file
declare -A hint_exe hint_case
if [[ $hints_file != none && -f $hints_file ]]; then
  while IFS=$'\t' read -r h_id h_exe h_case; do
    [[ -z $h_id || $h_id == '#'* || -z $h_exe || -z $h_case ]] && continue
    hint_exe[$h_id]=$h_exe
    hint_case[$h_id]=$h_case
  done <"$hints_file"
fi

# Progress goes to stderr under --json, so stdout holds the JSON alone.
say() { if [[ $json -eq 1 ]]; then printf '%s\n' "$*" >&2; else printf '%s\n' "$*"; fi; }
die() { echo "mutate: $*" >&2; exit 2; }

# ------------------------------------------------------------------ the list
ids=() files=() bugs=() origs=() repls=()
parse_list() {
  local line text lineno=0 id="" file="" bug="" orig="" repl="" has_o=0 has_r=0 start=0
  flush() {
    if [[ -z $id && -z $file && -z $bug && $has_o -eq 0 && $has_r -eq 0 ]]; then return; fi
    [[ -n $id ]] || die "$list_file:$start: a mutation without 'id:'"
    [[ -n $file ]] || die "$list_file:$start: mutation $id has no 'file:'"
    [[ -n $bug ]] || die "$list_file:$start: mutation $id has no 'bug:'"
    [[ $has_o -eq 1 && $has_r -eq 1 ]] || die "$list_file:$start: mutation $id needs '-' and '+' lines"
    [[ $orig != "$repl" ]] || die "$list_file:$start: mutation $id replaces its text with itself"
    local i
    for i in "${ids[@]}"; do [[ $i != "$id" ]] || die "$list_file:$start: duplicate id $id"; done
    ids+=("$id") files+=("$file") bugs+=("$bug") origs+=("$orig") repls+=("$repl")
    id="" file="" bug="" orig="" repl="" has_o=0 has_r=0
  }
  while IFS= read -r line || [[ -n $line ]]; do
    lineno=$((lineno + 1))
    case $line in
      '#'*) ;;
      '') flush ;;
      'id: '*) flush; id=${line#id: }; start=$lineno
        [[ $id =~ ^[A-Za-z0-9._-]+$ ]] || die "$list_file:$lineno: id '$id' (letters, digits, . _ - only)" ;;
      'file: '*) file=${line#file: } ;;
      'bug: '*) bug=${line#bug: } ;;
      '-' | '- '*)
        [[ $has_r -eq 0 ]] || die "$list_file:$lineno: '-' line after '+' lines in mutation $id"
        text=${line#-}
        if [[ $has_o -eq 1 ]]; then orig+=$'\n'; fi
        orig+=${text#" "} has_o=1 ;;
      '+' | '+ '*)
        text=${line#+}
        if [[ $has_r -eq 1 ]]; then repl+=$'\n'; fi
        repl+=${text#" "} has_r=1 ;;
      *) die "$list_file:$lineno: cannot read '$line' (id:, file:, bug:, '- ' or '+ ' lines)" ;;
    esac
  done <"$list_file"
  flush
}
parse_list
[[ ${#ids[@]} -gt 0 ]] || die "$list_file lists no mutation"

selected=()
if [[ -n $only ]]; then
  IFS=, read -r -a wanted <<<"$only"
  for w in "${wanted[@]}"; do
    found=0
    for i in "${!ids[@]}"; do
      if [[ ${ids[i]} == "$w" ]]; then selected+=("$i"); found=1; fi
    done
    [[ $found -eq 1 ]] || die "no mutation with id '$w' (see --list)"
  done
else
  selected=("${!ids[@]}")
fi
# --shard K/N: every N-th mutation from the K-th, so N runs in parallel (each in its own
# --workdir) cover the list once between them.
if [[ -n $shard ]]; then
  [[ $shard =~ ^([0-9]+)/([0-9]+)$ ]] || die "--shard takes K/N, such as 1/2"
  k=${BASH_REMATCH[1]} n=${BASH_REMATCH[2]}
  [[ $n -ge 1 && $k -ge 1 && $k -le $n ]] || die "--shard $shard: K must lie in 1..N"
  sharded=()
  for j in "${!selected[@]}"; do
    if [[ $((j % n)) -eq $((k - 1)) ]]; then sharded+=("${selected[j]}"); fi
  done
  selected=("${sharded[@]}")
fi

# Occurrences of the exact text $2 in file $1 (awk's index(): bash's own pattern matching is
# quadratic on a 50 kB file). RS is a byte source files never hold, so the file is one record.
occurrences() {
  NEEDLE=$2 awk 'BEGIN { RS = "\001"; n = ENVIRON["NEEDLE"] }
    { s = s $0 }
    END { c = 0; while ((i = index(s, n)) > 0) { c++; s = substr(s, i + length(n)) } print c }' "$1"
}
# File $1 with the first occurrence of $2 replaced by $3, on stdout.
substitute() {
  NEEDLE=$2 REPL=$3 awk 'BEGIN { RS = "\001"; n = ENVIRON["NEEDLE"]; r = ENVIRON["REPL"] }
    { s = s $0 }
    END { i = index(s, n); printf "%s%s%s", substr(s, 1, i - 1), r, substr(s, i + length(n)) }' "$1"
}

json_str() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\t'/\\t}
  s=${s//$'\r'/\\r}
  printf '"%s"' "$s"
}

# Whether mutation $1 applies to the tree at $2: prints the occurrence count.
applies() {
  local f=$2/${files[$1]}
  [[ -f $f ]] || { echo 0; return; }
  occurrences "$f" "${origs[$1]}"
}

if [[ $list_only -eq 1 ]]; then
  stale=0
  [[ $json -eq 1 ]] && printf '{"mutations": ['
  sep=""
  for i in "${selected[@]}"; do
    n=$(applies "$i" "$root")
    state=ok
    if [[ $n -ne 1 ]]; then
      state="stale ($n occurrences)"
      stale=$((stale + 1))
      echo "mutate: STALE ${ids[i]}: the original text occurs $n times in ${files[i]}, not once; update ${list_file#"$root"/}" >&2
    fi
    if [[ $json -eq 1 ]]; then
      printf '%s\n  {"id": %s, "file": %s, "bug": %s, "applies": %s}' "$sep" "$(json_str "${ids[i]}")" \
        "$(json_str "${files[i]}")" "$(json_str "${bugs[i]}")" "$([[ $n -eq 1 ]] && echo true || echo false)"
      sep=","
    else
      printf '%-34s %-38s %s%s\n' "${ids[i]}" "${files[i]}" "${bugs[i]}" "$([[ $state == ok ]] || echo "  [$state]")"
    fi
  done
  if [[ $json -eq 1 ]]; then printf '\n], "stale": %d}\n' "$stale"; else say "${#selected[@]} mutations, $stale stale"; fi
  [[ $stale -eq 0 ]]
  exit
fi

command -v cmake >/dev/null || die "cmake is not installed (scripts/install-deps.sh)"
command -v ninja >/dev/null || die "ninja is not installed (scripts/install-deps.sh)"
command -v git >/dev/null || die "git is not installed (scripts/install-deps.sh)"

# ------------------------------------------------------------------ the scratch tree
t_begin=$EPOCHREALTIME
if [[ -n $workdir ]]; then
  mkdir -p "$workdir" || die "cannot create $workdir"
  work=$(cd "$workdir" && pwd)
  keep=1
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/ctwin-mutate.XXXXXX") || die "cannot create a scratch directory"
  keep=0
fi
case $work/ in "$root"/*) die "the scratch directory must lie outside the source tree";; esac
# The build sits inside the copy, as ./build does in a checkout: with CCACHE_BASEDIR at $work the
# compiler sees the same relative paths as in a developer's own build, so even the first build of
# a fresh scratch tree mostly hits the cache.
src=$work/src build=$work/src/build logs=$work/logs
mkdir -p "$src" "$logs"
current=-1  # the mutation applied now, restored on exit from $work/original
cleanup() {
  if [[ $current -ge 0 ]]; then cp "$work/original" "$src/${files[current]}"; fi
  if [[ $keep -eq 0 ]]; then rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "mutate: scratch tree in $work"
# Copy tracked files that differ, so a kept build stays incremental.
copied=0
while IFS= read -r -d '' f; do
  [[ -f $root/$f && ! -L $root/$f ]] || continue
  if ! cmp -s "$root/$f" "$src/$f" 2>/dev/null; then
    mkdir -p "$src/$(dirname "$f")"
    cp "$root/$f" "$src/$f" || die "cannot copy $f"
    copied=$((copied + 1))
  fi
done < <(git -C "$root" ls-files -z)
# A kept tree drops files the source no longer tracks (moved or deleted), outside its build.
removed=0
if [[ $keep -eq 1 ]]; then
  declare -A tracked=()
  while IFS= read -r -d '' f; do tracked[$f]=1; done < <(git -C "$root" ls-files -z)
  while IFS= read -r -d '' f; do
    f=${f#"$src"/}
    if [[ -z ${tracked[$f]+x} ]]; then
      rm -f "$src/$f"
      removed=$((removed + 1))
    fi
  done < <(find "$src" -path "$build" -prune -o -type f -print0)
fi
say "mutate: $copied files copied, $removed removed"

# realrun's CUDA backend is built only where it can matter: a GPU to run its tests on, or a
# selected mutation in code that compiles only with CUDA. Without a GPU its test cases only say
# "skipped: no GPU", so the scratch tree leaves out nvcc and the backend's compiles and links.
cuda=OFF
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then cuda=ON; fi
for i in "${selected[@]}"; do
  case ${files[i]} in realrun/cuda/*) cuda=ON ;; esac
  if [[ -f $root/${files[i]} ]] && grep -q CTWIN_HAVE_CUDA "$root/${files[i]}"; then cuda=ON; fi
done
cmake_args=(-S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCTWIN_WERROR=ON -DCTWIN_BUILD_CUDA=$cuda)
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=$work CCACHE_NOHASHDIR=1
  cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
if ! cmake "${cmake_args[@]}" >"$logs/configure.log" 2>&1; then
  tail -30 "$logs/configure.log" >&2
  die "configuring the scratch tree failed (log: $logs/configure.log)"
fi
say "mutate: realrun's CUDA backend $([[ $cuda == ON ]] && echo built || echo "left out (no GPU, no mutation in CUDA-only code)")"
mapfile -t tests < <(ninja -C "$build" -t targets all 2>/dev/null | sed -n 's/^\(test_[A-Za-z0-9_]*\): phony$/\1/p' | sort -u)
[[ ${#tests[@]} -gt 0 ]] || die "the build defines no test_* executables"
say "mutate: building ${tests[*]} (${jobs} jobs)"
if ! cmake --build "$build" --parallel "$jobs" --target "${tests[@]}" >"$logs/build.log" 2>&1; then
  tail -30 "$logs/build.log" >&2
  die "the unmutated tree does not build (log: $logs/build.log)"
fi

# Runs test executable $1 (under timeout $2); returns its exit status, output in $3.
# stdin is /dev/null: the caller's loop reads its list from stdin, and a test that starts mpirun
# (test_realrun_mpi) would otherwise hand the rest of the list to its rank 0.
run_test() {
  (cd "$build/tests" && exec timeout --kill-after=10 "$2" "./$1" --abort-after=1 --no-version "${@:4}") >"$3" 2>&1 </dev/null
}

declare -A base_s
# A pass is an executable's quick cases or its slow ones (doctest's suite filter).
pass_args() {
  case $1 in
    slow) echo "--test-suite=slow" ;;
    quick) echo "--test-suite-exclude=slow" ;;
  esac
}
for t in "${tests[@]}"; do
  for p in quick slow; do
    t0=$EPOCHREALTIME
    if ! run_test "$t" 1800 "$logs/baseline-$t-$p.log" "$(pass_args $p)"; then
      tail -30 "$logs/baseline-$t-$p.log" >&2
      die "$t fails on the unmutated tree: fix that first (log: $logs/baseline-$t-$p.log)"
    fi
    base_s[$t $p]=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  done
done
baseline_line=""
for t in "${tests[@]}"; do baseline_line+=" $t ${base_s[$t quick]}+${base_s[$t slow]}s"; done
say "mutate: unmutated suite passes (quick+slow):$baseline_line"

limit_for() {
  if [[ -n $timeout_s ]]; then echo "$timeout_s"; else
    awk -v b="${base_s[$1 $2]}" 'BEGIN { t = 10 * b; if (t < 60) t = 60; printf "%d", t + 0.5 }'
  fi
}

# The mutated module's own tests first, its quick cases then its slow ones (its likeliest killers
# are in both suites; run whole in file order, test_workloads' 5 s of slow cases came before most
# of its quick ones), then the rest's quick cases, quickest first, then their slow cases.
mapfile -t by_speed < <(for t in "${tests[@]}"; do echo "${base_s[$t quick]} $t"; done | sort -n | cut -d' ' -f2)
order_for() {
  local module=${1%%/*} t p
  for t in "${tests[@]}"; do [[ $t == "test_$module" ]] && echo "$t quick" && echo "$t slow"; done
  for p in quick slow; do
    for t in "${by_speed[@]}"; do [[ $t == "test_$module" ]] || echo "$t $p"; done
  done
}

# ------------------------------------------------------------------ the mutations
statuses=() killers=() secs=()
n_sel=${#selected[@]}
k=0
for i in "${selected[@]}"; do
  k=$((k + 1))
  t0=$EPOCHREALTIME
  f=$src/${files[i]}
  status="" killer="" build_s=0 test_s=0 passes=0
  n=$(applies "$i" "$src")
  if [[ $n -ne 1 ]]; then
    status=stale killer="$n occurrences of the original text"
  else
    cp "$f" "$work/original" || die "cannot back up $f"
    current=$i
    substitute "$work/original" "${origs[i]}" "${repls[i]}" >"$f"
    status=survived
    log=$logs/${ids[i]}
    hinted=0
    if [[ -n ${hint_exe[${ids[i]}]:-} ]] && [[ " ${tests[*]} " == *" ${hint_exe[${ids[i]}]} "* ]]; then
      t=${hint_exe[${ids[i]}]}
      tb=$EPOCHREALTIME
      if cmake --build "$build" --parallel "$jobs" --target "$t" >"$log.build.log" 2>&1; then
        build_s=$(awk -v s="$build_s" -v a="$tb" -v b="$EPOCHREALTIME" 'BEGIN { print s + b - a }')
        tt=$EPOCHREALTIME
        # doctest splits -tc at commas; a backslash escapes one (and itself).
        filter=${hint_case[${ids[i]}]//\\/\\\\}
        filter=${filter//,/\\,}
        run_test "$t" "$(limit_for "$t" quick)" "$log.test.log" "--test-case=$filter" "${doctest_filter[@]}"
        rc=$?
        test_s=$(awk -v s="$test_s" -v a="$tt" -v b="$EPOCHREALTIME" 'BEGIN { print s + b - a }')
        passes=$((passes + 1))
        if [[ $rc -ne 0 && $rc -ne 124 && $rc -ne 137 ]]; then
          status=killed hinted=1
          killer="$t: ${hint_case[${ids[i]}]}"
        fi
      fi
    fi
    [[ $hinted -eq 1 ]] || while read -r t p; do
      tb=$EPOCHREALTIME
      built=1
      cmake --build "$build" --parallel "$jobs" --target "$t" >"$log.build.log" 2>&1 || built=0
      build_s=$(awk -v s="$build_s" -v a="$tb" -v b="$EPOCHREALTIME" 'BEGIN { print s + b - a }')
      if [[ $built -eq 0 ]]; then
        status=nobuild killer=$t
        killer="$(grep -m1 'error:' "$log.build.log" | cut -c1-200)"
        if [[ $verbose -eq 1 ]]; then grep -m5 -A3 'error:' "$log.build.log" >&2; fi
        break
      fi
      tt=$EPOCHREALTIME
      run_test "$t" "$(limit_for "$t" "$p")" "$log.test.log" "$(pass_args "$p")" "${doctest_filter[@]}"
      rc=$?
      test_s=$(awk -v s="$test_s" -v a="$tt" -v b="$EPOCHREALTIME" 'BEGIN { print s + b - a }')
      passes=$((passes + 1))
      if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        status=timeout killer=$t
        break
      elif [[ $rc -ne 0 ]]; then
        status=killed
        # The case whose assertion failed or that crashed, not the first one that printed.
        case_name=$(awk '/^TEST CASE: / { c = $0; sub(/^TEST CASE: */, "", c); next }
          /: (FATAL )?ERROR: / { print c; exit }' "$log.test.log")
        killer="$t${case_name:+: $case_name}"
        if [[ $verbose -eq 1 ]]; then grep -m3 -B2 -A6 'ERROR' "$log.test.log" >&2; fi
        break
      fi
    done < <(order_for "${files[i]}")
    cp "$work/original" "$f"  # a new mtime: the next build recompiles it (a ccache hit)
    current=-1
  fi
  dt=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  statuses+=("$status") killers+=("$killer") secs+=("$dt")
  label=$(echo "$status" | tr a-z A-Z)
  case $status in
    survived) detail="${bugs[i]}" ;;
    *) detail=$killer ;;
  esac
  split=""
  if [[ $status != stale ]]; then
    split=$(awk -v b="$build_s" -v t="$test_s" -v n="$passes" 'BEGIN { printf " (build %.1fs, %d test runs %.1fs)", b, n, t }')
  fi
  say "$(printf '[%d/%d] %-8s %-34s %6ss  %s%s' "$k" "$n_sel" "$label" "${ids[i]}" "$dt" "$detail" "$split")"
done

# ------------------------------------------------------------------ killer hints
if [[ $record_killers -eq 1 && $hints_file != none ]]; then
  new_hints=$(mktemp)
  for j in "${!selected[@]}"; do
    [[ ${statuses[j]} == killed && ${killers[j]} == *": "* ]] || continue
    printf '%s\t%s\t%s\n' "${ids[selected[j]]}" "${killers[j]%%: *}" "${killers[j]#*: }" >>"$new_hints"
  done
  (
    flock 9
    { [[ -f $hints_file ]] && grep -v '^#' "$hints_file"; } | awk -F'\t' 'NR == FNR { seen[$1] = 1; print; next } !($1 in seen)' "$new_hints" - |
      sort -t$'\t' -k1,1 >"$hints_file.tmp"
    { echo "# Killer hints for scripts/mutate.sh (ID, test executable, test case), written by --record-killers."
      cat "$hints_file.tmp"; } >"$hints_file"
    rm -f "$hints_file.tmp"
  ) 9>"$hints_file.lock"
  rm -f "$new_hints" "$hints_file.lock"
fi

# ------------------------------------------------------------------ summary
killed=0 survived=0 stale=0 nobuild=0
for s in "${statuses[@]}"; do
  case $s in
    killed | timeout) killed=$((killed + 1)) ;;
    survived) survived=$((survived + 1)) ;;
    stale) stale=$((stale + 1)) ;;
    nobuild) nobuild=$((nobuild + 1)) ;;
  esac
done
measured=$((killed + survived))
if [[ $measured -gt 0 ]]; then
  score=$(awk -v k="$killed" -v m="$measured" 'BEGIN { printf "%.3f", k / m }')
  low=$(awk -v s="$score" -v m="$min_score" 'BEGIN { print (s + 1e-9 < m) ? 1 : 0 }')
else
  score=null low=0
fi
total_s=$(awk -v a="$t_begin" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
ok=1
[[ $low -eq 0 && $stale -eq 0 && $nobuild -eq 0 ]] || ok=0

if [[ $json -eq 1 ]]; then
  printf '{\n  "mutations": ['
  sep=""
  for j in "${!selected[@]}"; do
    i=${selected[j]}
    printf '%s\n    {"id": %s, "file": %s, "bug": %s, "status": %s, "detail": %s, "seconds": %s}' "$sep" \
      "$(json_str "${ids[i]}")" "$(json_str "${files[i]}")" "$(json_str "${bugs[i]}")" \
      "$(json_str "${statuses[j]}")" "$(json_str "${killers[j]}")" "${secs[j]}"
    sep=","
  done
  printf '\n  ],\n  "killed": %d,\n  "survived": %d,\n  "stale": %d,\n  "nobuild": %d,\n' "$killed" "$survived" "$stale" "$nobuild"
  printf '  "score": %s,\n  "min_score": %s,\n  "seconds": %s,\n  "survivors": [' "$score" "$min_score" "$total_s"
  sep=""
  for j in "${!selected[@]}"; do
    [[ ${statuses[j]} == survived ]] || continue
    i=${selected[j]}
    printf '%s\n    {"id": %s, "file": %s, "bug": %s}' "$sep" "$(json_str "${ids[i]}")" "$(json_str "${files[i]}")" \
      "$(json_str "${bugs[i]}")"
    sep=","
  done
  printf '\n  ],\n  "ok": %s\n}\n' "$([[ $ok -eq 1 ]] && echo true || echo false)"
fi

say ""
say "mutation score: $killed killed / $measured = $score (minimum $min_score); $stale stale, $nobuild did not compile; ${total_s}s"
if [[ $survived -gt 0 ]]; then
  say "survivors:"
  for j in "${!selected[@]}"; do
    [[ ${statuses[j]} == survived ]] || continue
    i=${selected[j]}
    say "  ${ids[i]} (${files[i]}): ${bugs[i]}"
  done
fi
for j in "${!selected[@]}"; do
  i=${selected[j]}
  case ${statuses[j]} in
    stale) say "STALE: ${ids[i]} (${files[i]}): the original text occurs ${killers[j]%% *} times, not once; update $list_file" ;;
    nobuild) say "NOBUILD: ${ids[i]} (${files[i]}) does not compile; fix it in $list_file: ${killers[j]}" ;;
  esac
done
[[ $keep -eq 1 ]] && say "mutate: scratch tree and logs kept in $work"
[[ $ok -eq 1 ]]
