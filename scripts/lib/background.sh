# Sourced by .ci/run and scripts/test: runs a command in the background at
# the lowest priority, so that it takes the CPU the foreground leaves idle
# (tests that wait, a linker's single thread, pytest) and yields it
# otherwise: the foreground's timings stay its own.
#
# The command runs in a session of its own, so that all of it (cargo,
# rustc, the linker, pytest and what they start) can be stopped as one
# process group with `kill -- -PID`. Where the kernel groups a session's
# processes for scheduling (autogroup), `nice` only ranks processes within
# their group, and a new session is a new group that would get its full
# share: the group itself is given nice 19. Its disk reads and writes wait
# for the foreground's too (ionice's idle class), where ionice is there.
#
# Call with `&` only: it replaces the background subshell, so that `$!` is
# the session's leader.

low_priority=(nice -n 19)
command -v ionice >/dev/null 2>&1 && low_priority=(ionice -c 3 "${low_priority[@]}")

in_background() {
    exec setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null || true; exec "$@"' low "${low_priority[@]}" "$@"
}

# Runs a command in the background at normal priority, in a session of its
# own (so that stop_background stops all of it). With `&` only, as above.
in_session() {
    exec setsid "$@"
}

# Stops the background session led by PID (and everything in it), if it
# is still running.
stop_background() {
    if [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; then
        kill -- "-$1" 2>/dev/null || true
    fi
}

