# Sourced by the toolkit's scripts before anything else, and written for
# bash 3.2 itself (tests/check-bash32.sh holds it to that):
#
#   . "$(dirname "$0")/portable.sh" "$@"     (as the script's first command)
#
# 1. bash 4 or later. macOS's /bin/bash is 3.2, which has no associative
#    arrays, mapfile or wait -n: there the script runs itself again under
#    Homebrew's bash (scripts/install-deps.sh installs it), or stops with
#    one line saying so, status 2.
# 2. GNU coreutils' timeout, sha256sum and realpath (with -m) under their
#    own names. Homebrew's coreutils installs them with a g in front
#    (gtimeout, ...): links by their own names to those go in
#    build/gnu-tools/ of this checkout, first on PATH. A tool found under
#    neither name stops the script with one line, status 2.
if [ -z "${BASH_VERSINFO:-}" ] || [ "${BASH_VERSINFO[0]}" -lt 4 ]; then
    for zz_bash in /opt/homebrew/bin/bash /usr/local/bin/bash; do
        if [ -x "$zz_bash" ] && "$zz_bash" -c '[ "${BASH_VERSINFO[0]}" -ge 4 ]' 2>/dev/null; then
            exec "$zz_bash" "$0" "$@"
        fi
    done
    echo "${0##*/}: needs bash 4 or later, and this is bash ${BASH_VERSION:-of another kind}: on macOS, brew install bash (scripts/install-deps.sh does)" >&2
    exit 2
fi
zz_tools_missing=""
command -v timeout > /dev/null 2>&1 || zz_tools_missing="$zz_tools_missing timeout"
command -v sha256sum > /dev/null 2>&1 || zz_tools_missing="$zz_tools_missing sha256sum"
realpath -m / > /dev/null 2>&1 || zz_tools_missing="$zz_tools_missing realpath"
if [ -n "$zz_tools_missing" ]; then
    zz_tools_folder=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/gnu-tools
    mkdir -p "$zz_tools_folder" || exit 2
    for zz_tool in $zz_tools_missing; do
        zz_found=$(command -v "g$zz_tool" 2> /dev/null)
        if [ -z "$zz_found" ]; then
            echo "${0##*/}: needs GNU $zz_tool, found neither as $zz_tool nor as g$zz_tool: on macOS, brew install coreutils (scripts/install-deps.sh does)" >&2
            exit 2
        fi
        ln -sf "$zz_found" "$zz_tools_folder/$zz_tool" || exit 2
    done
    PATH=$zz_tools_folder:$PATH
    export PATH
fi
# 3. Symbol names as ELF writes them. Mach-O (macOS) puts an underscore in
#    front of every C name (_main for main): there nm goes through a
#    wrapper in build/gnu-tools/ that takes it off each name, so that the
#    checks on a student's files (scripts/check-submission.sh) read the same
#    names on both.
if [ "$(uname -s 2>/dev/null)" = Darwin ]; then
    zz_nm=$(type -P nm)
    zz_tools_folder=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/gnu-tools
    if [ -n "$zz_nm" ] && [ "$zz_nm" != "$zz_tools_folder/nm" ]; then
        mkdir -p "$zz_tools_folder" || exit 2
        printf '#!/bin/sh
# Made by scripts/portable.sh: nm, with Mach-O'"'"'s underscore taken off each name.
"%s" "$@" | awk '"'"'NF >= 2 { sub(/^_/, "", $NF) } { print }'"'"'
' \
            "$zz_nm" > "$zz_tools_folder/nm.$$" && chmod +x "$zz_tools_folder/nm.$$" &&
            mv -f "$zz_tools_folder/nm.$$" "$zz_tools_folder/nm" || exit 2
        case ":$PATH:" in
            *":$zz_tools_folder:"*) ;;
            *) PATH=$zz_tools_folder:$PATH; export PATH ;;
        esac
    fi
fi
unset zz_bash zz_tools_missing zz_tools_folder zz_tool zz_found zz_nm
