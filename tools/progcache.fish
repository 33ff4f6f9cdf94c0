# fish completion for progcache: subcommands, their options and the values
# some options take. Installed as <prefix>/share/fish/vendor_completions.d/
# progcache.fish, where fish looks by itself. The options come from the
# command itself (progcache CMD --list-options), so they are never out of
# date. tests/admin/test_tool_completion.py checks it.

# The candidates for the token being completed, one a line.
function __progcache_candidates
    set -l tokens (commandline -opc)
    set -l cur (commandline -ct)
    set -l prog $tokens[1]
    set -l commands stats ls verify prune clear get put export import warm key explain remote exec config doctor help
    set -l settings ($prog config --list-settings 2>/dev/null)
    # The subcommand: the first word that is not an option (or -d's value).
    set -l cmd
    set -l skip 0
    for t in $tokens[2..-1]
        if test $skip = 1
            set skip 0
            continue
        end
        switch $t
            case -d --dir
                set skip 1
            case '-*'
            case '*'
                set cmd $t
                break
        end
    end
    set -l prev $tokens[-1]
    if test (count $tokens) -lt 2
        set prev ''
    end
    switch $prev
        case -d --dir
            __fish_complete_directories $cur
            return
        case -o --output --header --digest-file --secret-file
            __fish_complete_path $cur
            return
        case -t --target
            printf '%s\n' cubin ptx ltoir
            return
        case -u --unset
            printf '%s\n' $settings
            return
        case --format
            printf '%s\n' text json openmetrics prometheus
            return
        case -s --sort
            test "$cmd" = ls; and printf '%s\n' name size age lru
            return
        case -a --arch
            test "$cmd" = warm; and printf '%s\n' sm_75 sm_80 sm_86 sm_89 sm_90 sm_90a sm_100 sm_120
            return
    end
    if test -z "$cmd"
        if string match -q -- '-*' $cur
            printf '%s\n' -d --dir -q --quiet -h --help -V --version
        else
            printf '%s\n' $commands
        end
        return
    end
    # The subcommand's own table: "-x --name 1" (short or -, long, takes a value).
    set -l table ($prog $cmd --list-options 2>/dev/null)
    for line in $table
        set -l f (string split ' ' -- $line)
        # ("x": a "-" must not read as an operator of test)
        if test "$f[3]" = 1
            if test "x$prev" = "x$f[2]"; or begin; test "x$f[1]" != x-; and test "x$prev" = "x$f[1]"; end
                return # a value we know nothing of
            end
        end
    end
    if string match -q -- '-*' $cur
        for line in $table
            set -l f (string split ' ' -- $line)
            test "x$f[1]" != x-; and echo $f[1]
            echo $f[2]
        end
        return
    end
    switch $cmd
        case help
            printf '%s\n' $commands
        case config
            printf '%s\n' $settings
        case put export import warm key explain
            __fish_complete_path $cur
    end
end

complete -c progcache -f -a '(__progcache_candidates)'
