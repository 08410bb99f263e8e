# lazyblk stage 2 (vmm-glue/initramfs/stage2.sh, built into lazyblk): runs inside the image's
# root with the initramfs's busybox; sets the command's environment, user and directory
# and execs it. No program of the image runs except the command itself.
# shellcheck shell=sh disable=SC1091  # busybox sh; config, env, cmd: written by the builder
L=/dev/.lazyblk
BB=$L/busybox
set -f
die() { echo "lazyblk: $1" >&2; exit "${2:-125}"; }
unset PATH HOME SHLVL OLDPWD
. $L/config
. $L/env
[ -n "${PATH+x}" ] || export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
. $L/cmd
[ $# -gt 0 ] || die "no command to run"
u=${LZ_USER:-0}
g=
case $u in *:*) g=${u#*:}; u=${u%%:*};; esac
uid='' gid='' home=''
if [ -r /etc/passwd ]; then
	# shellcheck disable=SC2034  # px pc ps: unused fields
	while IFS=: read -r pn px pu pg pc ph ps; do
		if [ "$pn" = "$u" ] || [ "$pu" = "$u" ]; then uid=$pu gid=$pg home=$ph; break; fi
	done < /etc/passwd
fi
if [ -z "$uid" ]; then
	case $u in ''|*[!0-9]*) die "unable to find user $u: no matching entries in /etc/passwd";; esac
	uid=$u gid=0
fi
if [ -n "$g" ]; then
	case $g in
	*[!0-9]*)
		gid=
		if [ -r /etc/group ]; then
			# shellcheck disable=SC2034  # gx gr: unused fields
			while IFS=: read -r gn gx gg gr; do
				[ "$gn" = "$g" ] && { gid=$gg; break; }
			done < /etc/group
		fi
		[ -n "$gid" ] || die "unable to find group $g: no matching entries in /etc/group";;
	*) gid=$g;;
	esac
fi
if [ -z "${HOME+x}" ]; then
	if [ "$uid" = 0 ]; then export HOME="${home:-/root}"; else export HOME="${home:-/}"; fi
fi
wd=${LZ_WORKDIR:-/}
[ -d "$wd" ] || $BB mkdir -p "$wd" || die "cannot create the working directory $wd"
cd "$wd" || die "cannot enter the working directory $wd"
c=$1
case $c in
*/*) p=$c;;
*)
	p=
	oifs=$IFS
	IFS=:
	for d in $PATH; do
		[ -n "$d" ] || d=.
		if [ -f "$d/$c" ] && [ -x "$d/$c" ]; then p=$d/$c; break; fi
	done
	IFS=$oifs;;
esac
{ [ -n "$p" ] && [ -e "$p" ]; } || die "$c: command not found" 127
{ [ -f "$p" ] && [ -x "$p" ]; } || die "$c: permission denied (not an executable file)" 126
exec $L/lazyblk-exec "$uid" "$gid" "$p" "$@"
