# Guest-side iSCSI helper of the VM tests (test_iscsi_vm.sh, test_pool_fault_vm.sh): the
# host inlines it after the first line of the guest script it writes (sed -i "1r FILE").
# The guest script sets IQN and PORTAL and defines fail().

# iscsi_login: logs in to $IQN at $PORTAL (LOGGED_IN=1); dev is the disk that appears.
iscsi_login() {
	timeout 60 iscsiadm -m node -T "$IQN" -p "$PORTAL" --login || fail "login (rc $?)"
	LOGGED_IN=1
	dev=
	for _ in $(seq 1 300); do
		for b in /sys/class/iscsi_session/session*/device/target*/*/block/*; do
			[ -e "$b" ] && { dev=/dev/$(basename "$b"); break 2; }
		done
		sleep 0.1
	done
	[ -n "$dev" ] && [ -b "$dev" ] || fail "no disk appeared after login"
}
