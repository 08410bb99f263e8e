/* SPDX-License-Identifier: MIT */
/*
 * Ctrl-C and SIGTERM for the one-shot commands that write (import, export, push): the
 * signals are blocked in every thread and taken by one thread of their own, which sets the
 * flag the library polls (its options' cancel), so the work stops where it can clean up:
 * its temporary files removed, nothing half-written left, and the command exits 130 with
 * one line. A second signal kills the process at once.
 */
#include <pthread.h>
#include <signal.h>
#include <stddef.h>

#include "cli.h"

static int interrupted; /* the signal taken; a signal is the process's, so is this */

static void *interrupt_watch(void *arg)
{
	const sigset_t *set = arg;
	int sig;

	while (sigwait(set, &sig) || (sig != SIGINT && sig != SIGTERM))
		;
	__atomic_store_n(&interrupted, sig, __ATOMIC_RELAXED);
	while (sigwait(set, &sig) || (sig != SIGINT && sig != SIGTERM))
		;
	signal(sig, SIG_DFL); /* the user insists: die of the signal */
	pthread_sigmask(SIG_UNBLOCK, set, NULL);
	raise(sig);
	return NULL;
}

const int *cli_interrupt_catch(void)
{
	static sigset_t set;
	pthread_t t;

	sigemptyset(&set);
	for (int i = 0; i < 2; i++) {
		int sig = i ? SIGTERM : SIGINT;
		struct sigaction old;

		/* one the process was started to ignore (a background job of a script) stays so */
		if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
			sigaddset(&set, sig);
	}
	if (sigisemptyset(&set))
		return &interrupted; /* nothing to take: never set */
	/* before the library starts a thread: every one inherits the mask */
	if (pthread_sigmask(SIG_BLOCK, &set, NULL))
		return NULL;
	if (pthread_create(&t, NULL, interrupt_watch, &set)) {
		pthread_sigmask(SIG_UNBLOCK, &set, NULL);
		return NULL;
	}
	pthread_detach(t);
	return &interrupted;
}
