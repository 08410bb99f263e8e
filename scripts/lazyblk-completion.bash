# bash completion for lazyblk (installed by `make install` as
# PREFIX/share/bash-completion/completions/lazyblk).
#
# Completes subcommands, sub-subcommands (cas verify, overlay apply, ...) and long options,
# all read from lazyblk's own --help texts when TAB is pressed, so they always match the
# binary being completed; anything else (files, directories) is bash's default completion.

# _lazyblk_help BIN [CMD]: the --help text of lazyblk or of its subcommand CMD.
_lazyblk_help()
{
	"$@" --help 2>/dev/null
}

_lazyblk()
{
	local cur=${COMP_WORDS[COMP_CWORD]} bin=${COMP_WORDS[0]} cmd="" i words
	COMPREPLY=()
	# the subcommand: the first word after the options before it (-v, -q)
	for ((i = 1; i < COMP_CWORD; i++)); do
		if [[ ${COMP_WORDS[i]} != -* ]]; then
			cmd=${COMP_WORDS[i]}
			break
		fi
	done
	if [[ -z $cmd || $cmd == help && $i -eq $((COMP_CWORD - 1)) ]]; then
		if [[ $cur == -* && -z $cmd ]]; then
			words=$(_lazyblk_help "$bin" |
				sed -nE 's/^ {2,6}(-[A-Za-z], )?(--[a-z][a-z0-9-]*).*/\2/p')
		else
			words=$(_lazyblk_help "$bin" |
				sed -n '/^subcommands:/,/^$/s/^  \([a-z][a-z0-9-]*\) .*/\1/p')
			[[ -z $cmd ]] && words="$words help"
		fi
		mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
		return 0
	fi
	[[ $cmd == help ]] && return 0
	if [[ $cur == -* ]]; then
		words=$(_lazyblk_help "$bin" "$cmd" |
			sed -nE 's/^ {2,6}(-[A-Za-z], )?(--[a-z][a-z0-9-]*).*/\2/p' | sort -u)
		mapfile -t COMPREPLY < <(compgen -W "$words --verbose --quiet" -- "$cur")
		return 0
	fi
	# the word after the subcommand: its own commands, as its usage lines name them
	if ((COMP_CWORD == i + 1)); then
		words=$(_lazyblk_help "$bin" "$cmd" |
			sed -nE "1,/^\$/s/^(usage:)? *lazyblk $cmd ([a-z]+)( .*)?\$/\\2/p" | awk '!seen[$0]++')
		if [[ -n $words ]]; then
			mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
			return 0
		fi
	fi
	return 0
}
complete -o default -F _lazyblk lazyblk
