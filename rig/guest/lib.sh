# Helpers for rig scenarios (sourced before /rig/scenario.sh; busybox sh).
#
# Results protocol on $RIG_OUT (ttyS1), one record per section, read by numapilot-rig on the host:
#   NPRIG BEGIN <name>
#   <stdout, base64>
#   NPRIG STDERR
#   <stderr, base64>
#   NPRIG END <name> <exit code>
# base64 keeps any byte (and any line that looks like a marker) out of the framing. Names: [A-Za-z0-9._-].

# rig_send NAME RC OUTFILE ERRFILE: send one section.
rig_send() {
	{
		echo "NPRIG BEGIN $1"
		base64 "$3"
		echo "NPRIG STDERR"
		base64 "$4"
		echo "NPRIG END $1 $2"
	} >"$RIG_OUT"
	read -r _rig_up _rig_idle </proc/uptime
	echo "rig: $_rig_up s: sent $1 (exit $2)"
}

# rig_run NAME CMD [ARG...]: run CMD, send its stdout, stderr and exit code as section NAME. Returns CMD's code.
rig_run() {
	_rig_name=$1
	shift
	"$@" >/tmp/.rig.out 2>/tmp/.rig.err
	_rig_rc=$?
	rig_send "$_rig_name" "$_rig_rc" /tmp/.rig.out /tmp/.rig.err
	return $_rig_rc
}

# rig_file NAME PATH: send a file's content as section NAME (exit code 1 and cat's error if unreadable).
rig_file() {
	rig_run "$1" cat "$2"
}

# rig_wait_ready FILE PID SECS: wait until FILE exists, while process PID is alive, at most SECS seconds.
# Returns 0 when FILE appeared, 1 if PID exited first, 2 on timeout.
rig_wait_ready() {
	_rig_i=0
	while [ ! -f "$1" ]; do
		kill -0 "$2" 2>/dev/null || { [ -f "$1" ] && return 0; return 1; }
		_rig_i=$((_rig_i + 1))
		[ $_rig_i -gt $(($3 * 10)) ] && return 2
		sleep 0.1
	done
	return 0
}

# rig_wait_grep PATTERN FILE SECS: wait until FILE has a line matching PATTERN (grep -E), at most SECS seconds.
# Returns 0 when it has, 1 on timeout.
rig_wait_grep() {
	_rig_i=0
	until grep -qE "$1" "$2" 2>/dev/null; do
		_rig_i=$((_rig_i + 1))
		[ $_rig_i -gt $(($3 * 5)) ] && return 1
		sleep 0.2
	done
	return 0
}

# rig_note TEXT: a line on the console (for humans reading a failed run's console tail).
rig_note() {
	echo "rig: $*"
}

# rig_daemon_section INTERVAL_MS: print the [daemon] section every daemon scenario's configuration starts with (a
# step every INTERVAL_MS, journal, state file and socket under /run/numapilot, no metrics listener); a scenario
# writes it to its file and appends its own sections (`{ rig_daemon_section 500; echo '[exclude]'; ...; } >FILE`).
rig_daemon_section() {
	echo '[daemon]'
	echo "interval_ms = $1"
	echo 'journal = "/run/numapilot/np-journal.jsonl"'
	echo 'state = "/run/numapilot/state.json"'
	echo 'socket = "/run/numapilot/numapilot.sock"'
	echo 'metrics = "off"'
}

# rig_daemon_stop PID LOG NAME: SIGTERM to the daemon PID (it restores every process it touched, then exits), wait
# for it, and send section NAME: stdout = its exit code, stderr = LOG (its output).
rig_daemon_stop() {
	kill -TERM "$1"
	wait "$1"
	echo $? >/tmp/.rig.rc
	rig_send "$3" 0 /tmp/.rig.rc "$2"
}

# rig_start NAME SECS CMD [ARG...]: start CMD in the background with `--ready /tmp/NAME.ready` appended (the
# rig-toucher protocol: the file appears, holding the pid, once all memory is touched) and wait up to SECS seconds.
# Sends section NAME-start: stdout = the pid, stderr = the command's output so far, exit code 0 (ready), 1 (the
# command exited first; its own exit code is in the stderr text) or 2 (timeout). Sets RIG_PID ("" unless ready).
rig_start() {
	_rig_sn=$1
	_rig_secs=$2
	shift 2
	rm -f "/tmp/$_rig_sn.ready"
	"$@" --ready "/tmp/$_rig_sn.ready" >"/tmp/$_rig_sn.log" 2>&1 &
	_rig_bg=$!
	rig_wait_ready "/tmp/$_rig_sn.ready" "$_rig_bg" "$_rig_secs"
	_rig_w=$?
	RIG_PID=""
	if [ $_rig_w = 0 ]; then
		RIG_PID=$(cat "/tmp/$_rig_sn.ready")
		echo "$RIG_PID" >/tmp/.rig.pid
	else
		: >/tmp/.rig.pid
		if [ $_rig_w = 1 ]; then
			wait "$_rig_bg"
			echo "exit code $?" >>"/tmp/$_rig_sn.log"
		else
			kill "$_rig_bg" 2>/dev/null
		fi
	fi
	rig_send "$_rig_sn-start" "$_rig_w" /tmp/.rig.pid "/tmp/$_rig_sn.log"
}

# rig_threads NAME PID: send stat and status of every thread of PID as NAME-task-TID-stat / -status, and the
# list of thread ids as NAME-tids.
rig_threads() {
	ls "/proc/$2/task" >/tmp/.rig.tids 2>/tmp/.rig.err
	rig_send "$1-tids" $? /tmp/.rig.tids /tmp/.rig.err
	for _rig_t in $(cat /tmp/.rig.tids); do
		rig_file "$1-task-$_rig_t-stat" "/proc/$2/task/$_rig_t/stat"
		rig_file "$1-task-$_rig_t-status" "/proc/$2/task/$_rig_t/status"
	done
}
