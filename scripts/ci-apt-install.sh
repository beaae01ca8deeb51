#!/bin/sh
# ci-apt-install.sh LABEL WHY PACKAGE...
#
# Installs Debian packages that a group of tests needs, for the Makefile's browser, postgres
# and proxies targets, and only under CI (the CI variable set, as CI services set CI=true):
# outside CI the targets only look for the tools and say what the tests will skip, so that
# `make test` never changes a person's machine, even as root. Under CI it says what it
# installs and why, and it leaves the machine's services alone:
#   - nothing is started: a policy-rc.d that refuses every start is in place during the
#     install (Docker images ship one already; it is then left as it is);
#   - nothing is enabled at boot: the packages' systemd units and init scripts are disabled
#     right after the install (the tests run the binaries themselves, never the services);
#   - nothing unrelated is upgraded: apt-get install --no-upgrade, and when a package's own
#     dependencies need newer versions of installed libraries (chromium and libnss3, for one),
#     they are named before the install.
set -u
label=$1 why=$2
shift 2

if [ -z "${CI:-}" ]; then
	echo "$label: not installing $* (CI is not set; this script only installs under CI)"
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "$label: CI is set but this is not a root shell with apt-get: cannot install $*; $why will fail"
	exit 0
fi

echo "$label: CI is set: installing Debian's $* with apt-get (for $why); their services are neither started nor enabled at boot"

# Refuse service starts during the install, unless a policy is there already.
policy=/usr/sbin/policy-rc.d
own_policy=
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\n# written by baton scripts/ci-apt-install.sh for the length of an install\nexit 101\n' >"$policy"
	chmod 755 "$policy"
	own_policy=1
fi
cleanup() { [ -n "$own_policy" ] && rm -f "$policy"; }
trap cleanup EXIT INT TERM

export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -qq; then
	echo "$label: apt-get update failed; $why will fail"
	exit 0
fi

plan=$(apt-get install -s -y --no-install-recommends --no-upgrade "$@" 2>/dev/null)
# "Inst name [old] (new …)" is an upgrade of an installed package; "Inst name (new …)" a new one.
upgrades=$(printf '%s\n' "$plan" | sed -n 's/^Inst \([^ ]*\) \[\([^]]*\)\] (\([^ ]*\).*/\1 \2 -> \3/p')
new=$(printf '%s\n' "$plan" | sed -n 's/^Inst \([^ ]*\) (.*/\1/p')
if [ -n "$upgrades" ]; then
	echo "$label: the dependencies of $* need newer versions of these installed packages, which apt upgrades:"
	printf '%s\n' "$upgrades" | sed "s/^/$label:   /"
fi
echo "$label: $(printf '%s\n' "$new" | grep -c .) new packages"

if ! apt-get install -y -qq --no-install-recommends --no-upgrade "$@"; then
	echo "$label: installing $* failed; $why will fail"
	exit 0
fi

# Disable at boot what the new packages enabled (their postinst scripts enable services even
# where they cannot start them).
for pkg in $new; do
	for f in $(dpkg -L "$pkg" 2>/dev/null | grep -E '^(/usr)?/lib/systemd/system/[^/]+\.(service|socket|timer)$|^/etc/init\.d/[^/]+$'); do
		unit=${f##*/}
		case $f in
		/etc/init.d/*)
			update-rc.d "$unit" disable >/dev/null 2>&1 && echo "$label: disabled at boot: /etc/init.d/$unit" ;;
		*)
			if command -v deb-systemd-helper >/dev/null 2>&1; then
				deb-systemd-helper disable "$unit" >/dev/null 2>&1
			else
				systemctl disable "$unit" >/dev/null 2>&1
			fi && echo "$label: disabled at boot: $unit" ;;
		esac
	done
done
exit 0
