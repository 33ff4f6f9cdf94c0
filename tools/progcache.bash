# bash completion for progcache: subcommands, their options, and the values
# some options take. Installed as <prefix>/share/bash-completion/completions/
# progcache (bash-completion loads it on first use); or source it from
# ~/.bashrc. Self-contained: needs nothing from the bash-completion package.
# tests/admin/test_tool_cli.py checks it against every subcommand's --help.

_progcache()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local commands="stats ls verify prune clear get put export import warm key explain remote exec config doctor help"
    # The settings a file may hold, from the command (never typed here).
    local settings
    settings=$("${COMP_WORDS[0]}" config --list-settings 2>/dev/null)
    local common="-d --dir -h --help"
    local i cmd=
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        -d | --dir | --shared-group) ((i++)) ;;
        -*) ;;
        *)
            cmd=${COMP_WORDS[i]}
            break
            ;;
        esac
    done

    # The value of the option before the cursor.
    case $prev in
    -d | --dir)
        COMPREPLY=($(compgen -d -- "$cur"))
        return
        ;;
    -o | --output | --header | --digest-file | --secret-file)
        COMPREPLY=($(compgen -f -- "$cur"))
        return
        ;;
    --shared-group)
        COMPREPLY=($(compgen -g -- "$cur"))
        return
        ;;
    -t | --target)
        COMPREPLY=($(compgen -W "cubin ptx ltoir" -- "$cur"))
        return
        ;;
    -u | --unset)
        COMPREPLY=($(compgen -W "$settings" -- "$cur"))
        return
        ;;
    --sort)
        COMPREPLY=($(compgen -W "name size age lru" -- "$cur"))
        return
        ;;
    --format)
        COMPREPLY=($(compgen -W "text json openmetrics prometheus" -- "$cur"))
        return
        ;;
    --arch)
        COMPREPLY=($(compgen -W "sm_75 sm_80 sm_86 sm_89 sm_90 sm_90a sm_100 sm_120" -- "$cur"))
        return
        ;;
    -s | -a)
        case $cmd in
        ls) [[ $prev == -s ]] && COMPREPLY=($(compgen -W "name size age lru" -- "$cur")) ;;
        warm) [[ $prev == -a ]] && COMPREPLY=($(compgen -W "sm_80 sm_90 sm_90a sm_100" -- "$cur")) ;;
        esac
        return
        ;;
    --max-artifact-size | -M | --max-size | --older-than | -j | --jobs | -e | --entry | -n | --name | \
        --name-expression | --extra-digest | --nvrtc-version | --url | --prefix | --lease | --pings)
        return
        ;;
    esac

    if [[ -z $cmd ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "$common -q --quiet -V --version --shared-group" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$commands" -- "$cur"))
        fi
        return
    fi

    local opts
    case $cmd in
    stats) opts="--json --format -z --zero --charts --no-charts -v --verbose" ;;
    ls) opts="--json -s --sort --remote" ;;
    verify) opts="--json -f --fix --fix-unknown --seal --remote -q --quiet" ;;
    prune) opts="--json -M --max-size --older-than --remote -q --quiet" ;;
    clear) opts="--json -q --quiet" ;;
    get) opts="-o --output -e --entry --max-artifact-size" ;;
    put) opts="--max-artifact-size" ;;
    export) opts="--max-artifact-size --sign --remote -q --quiet" ;;
    import) opts="--max-artifact-size --verify -q --quiet" ;;
    warm) opts="--json -a --arch -j --jobs --max-artifact-size -q --quiet" ;;
    key | explain)
        opts="-t --target -n --name --name-expression --name-expressions-bytes --extra-digest
              --header --digest-file --nvrtc-version --max-artifact-size" ;;
    remote) # the remote tier is not a directory's: no -d
        common="-h --help"
        opts="--json --url --secret-file --prefix --lease --pings" ;;
    config) opts="--json -u --unset" ;;
    exec) opts="--where" ;;
    doctor) opts="--json" ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$common $opts" -- "$cur"))
        return
    fi
    case $cmd in
    help) COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
    config) COMPREPLY=($(compgen -W "$settings" -- "$cur")) ;;
    put | export | import | warm | key | explain) COMPREPLY=($(compgen -f -- "$cur")) ;;
    exec) COMPREPLY=($(compgen -c -- "$cur")) ;;
    esac
}
complete -F _progcache progcache
