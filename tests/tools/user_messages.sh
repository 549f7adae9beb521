# Sourced by the tool tests whose cases end in an error. Note [User errors
# and internal errors]: the message a user reads names the flag, the file or
# the value, never the place in zrt's source that found it; that place
# appears only under ZRT_DEBUG=1, which these tests therefore leave unset.
unset ZRT_DEBUG

# shows_source NAME OUTPUT: prints "FAIL NAME: ..." and returns 0 when OUTPUT
# holds a source location (`file.cpp:`, `.h:`, `.cu:`, "check `"); returns 1
# (nothing to report) otherwise. Use: `shows_source "$name" "$out" && { count a failure; }`.
shows_source() {
  local found
  found=$(grep -m1 -E -- '\.(cpp|h|cu|cuh):|check `' <<<"$2") || return 1
  echo "FAIL $1: the message shows zrt's source (only ZRT_DEBUG=1 may): $found"
  return 0
}

# A name that is no command (a helper called above its definition, a typo)
# would print one line and let the script go on, the case never run but not
# failed: end the whole test instead.
command_not_found_handle() {
  echo "FAIL: '$1' is not a command (line ${BASH_LINENO[0]}): the test stops" >&2
  kill -TERM $$
  return 127
}
