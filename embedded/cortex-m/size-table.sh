#!/usr/bin/env bash
# size-table.sh MAP: the code (.text) and read-only data (.rodata) that librope_kernels.a
# contributes to a linked ELF, from its GNU ld map file (-Wl,-Map): the input sections of
# the archive that --gc-sections kept, named by their (demangled) symbols and grouped by
# module: `rope_kernels::kernels`, `rope_kernels::freq`, `core::fmt`, `libm::...`, the C
# entry points `rope_*`, compiler builtins.
set -euo pipefail
map=$1
awk '
  function hex(s,   i, n, c) { n = 0; s = tolower(s); sub(/^0x/, "", s)
    for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)) - 1; n = n * 16 + c }
    return n }
  function emit(sec, size, obj) { if (kept && obj ~ /librope_kernels\.a\(/ && hex(size) > 0) print hex(size), sec }
  /^Linker script and memory map/ { kept = 1 }
  /^ \.(text|rodata)[. ]/ || /^ \.(text|rodata)$/ { sec = $1; if (NF >= 4) { emit(sec, $3, $4); sec = "" } ; next }
  sec != "" && /^ +0x[0-9a-f]+ +0x[0-9a-f]+ / { emit(sec, $2, $3); sec = ""; next }
  { sec = "" }
' "$map" | sed -E 's/^([0-9]+) \.(text|rodata)\.?/\1 \2 /' | arm-none-eabi-c++filt | awk '
  { size = $1; kind = $2; $1 = ""; $2 = ""; name = substr($0, 3)
    g = name; sub(/^</, "", g); sub(/^_</, "", g)
    if (g == "") g = "(unnamed " kind ")"
    else if (g ~ /^rope_[a-z0-9_]+$/) g = "C ABI entry points (rope_*)"
    else if (g ~ /^__aeabi|^__[a-z]+[sdt]f[0-9]|^__[a-z]+di[0-9]|^compiler_builtins/) g = "compiler builtins"
    else if (g ~ /::/) { gsub(/\[[0-9a-f]+\]/, "", g); n = split(g, p, "::"); g = p[1] (n > 2 && p[1] == "rope_kernels" ? "::" p[2] : ""); sub(/[<( ].*/, "", g) }
    else if (g ~ /^unlikely\./ || g ~ /^_R/) g = "core (panic paths)"
    else g = "(constants, other)"
    tot[g] += size; k[g, kind] += size; all[kind] += size }
  END {
    n = 0; for (c in tot) names[++n] = c
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (tot[names[j]] > tot[names[i]]) { t = names[i]; names[i] = names[j]; names[j] = t }
    printf "  %-40s %8s %8s %8s\n", "part (librope_kernels.a)", ".text", ".rodata", "bytes"
    for (i = 1; i <= n; i++) { c = names[i]; printf "  %-40s %8d %8d %8d\n", c, k[c, "text"], k[c, "rodata"], tot[c] }
    printf "  %-40s %8d %8d %8d\n", "TOTAL", all["text"], all["rodata"], all["text"] + all["rodata"]
  }'
