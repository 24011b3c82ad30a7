// Package ownerlock gives a kernel on a shared store a default owner name that is the
// same after a restart and held by one live process at a time.
//
// A name is a slot of a namespace: the host (its name and, where the system has one,
// its machine ID), the user (the uid) and the store (its identity, or "" for one
// namespace per host and user). [Take] takes the lowest free slot: slot n is free when
// no open file holds the flock(2) lock of the slot's lock file, so the lock ends with
// the process that held it, however it ended (kill -9 included). A process restarted
// after a crash takes the slot, and so the name, its predecessor had (the lowest free
// one); two live holders never share a slot, in one process or many. A slot of this
// process is also marked in a table of the process, so that two kernels of one process
// never share one even where the file system's flock locks belong to the process
// rather than to the open file (NFS).
//
// The lock files are in os.UserCacheDir()/ax-owners, or in os.TempDir() where that
// directory cannot be made. [Slot.Release] removes the file before it closes it; a
// taker that locked a file since removed (its path now names another file, or none)
// tries again. Only processes that share the directory see each other's locks:
// containers given the host's name with a /tmp and a home of their own do not.
//
// On systems without flock(2) (Windows, Solaris, AIX, Plan 9, js and wasip1), Take
// returns an error wrapping [errors.ErrUnsupported].
package ownerlock
