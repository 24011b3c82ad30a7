package durable

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"

	"github.com/axsched/ax/kernel/internal/durable/ownerlock"
	"github.com/axsched/ax/store"
)

// ownerName returns the name the kernel joins under, and the slot that holds it
// when it is a default one (nil otherwise): name when set; else the lowest free slot
// of this host, user and store (the store's [store.Identifier] identity, or one
// namespace per host without it), held until [Owner.Release] or the end of the
// process, so that a process restarted after a crash joins under its predecessor's
// name and its Join ends the dead membership at once; else (no flock(2), every slot
// held, no usable lock directory) a generated name. It returns an error only when
// the store's Identity fails.
func (o *Owner) ownerName(ctx context.Context, name string) (string, *ownerlock.Slot, error) {
	if name != "" {
		return name, nil, nil
	}
	var id string
	if idf, ok := o.store.(store.Identifier); ok {
		v, err := call(o.guard, "Identity", func() (string, error) { return idf.Identity(ctx) })
		if err != nil {
			return "", nil, fmt.Errorf("kernel: read the store's identity for a default owner name: %w", err)
		}
		id = v
	}
	slot, err := ownerlock.Take("", id)
	if err != nil {
		name = generatedOwnerName()
		if !errors.Is(err, errors.ErrUnsupported) && o.log != nil {
			o.log.Log(slog.LevelWarn, "kernel: no default owner slot; this kernel joins under a generated name, and a restarted process waits out its lease", "owner", name, "err", err)
		}
		return name, nil, nil
	}
	return slot.Name(), slot, nil
}

// generatedOwnerName returns "ax-" and 12 random hex digits.
func generatedOwnerName() string {
	var b [6]byte
	_, _ = crand.Read(b[:])
	return "ax-" + hex.EncodeToString(b[:])
}

// rejoinName returns the name to join again under once the membership old ended:
// old's, unless old's is this kernel's default name and a live owner of a later
// epoch has it. A kernel that does not see this one's slot (on another host of the
// same name and machine ID, or in a container with a lock directory of its own) then
// joined under it and ended old; joining under it again would end that kernel's
// membership in turn, and so on. This kernel goes on under a generated name instead,
// and says so. Journal goroutine only.
func (o *Owner) rejoinName(old *store.Owner) string {
	if o.slot == nil || old.Name != o.slot.Name() {
		return old.Name
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	owners, err := call(o.guard, "Owners", func() ([]store.OwnerInfo, error) { return o.store.Owners(ctx) })
	if err != nil {
		return old.Name
	}
	for _, x := range owners {
		if x.Live && x.Name == old.Name && x.Epoch > old.Epoch {
			name := generatedOwnerName()
			if o.log != nil {
				o.log.Log(slog.LevelWarn, "kernel: another live kernel joined under this kernel's default owner name and ended its membership; "+
					"this kernel joins again under a generated name (give each process its own Config.Owner)",
					"owner", old.Name, "epoch", old.Epoch, "other", x.Epoch, "new", name)
			}
			return name
		}
	}
	return old.Name
}

// HoldsSlot reports whether the Owner's name is a default one held by a slot.
func (o *Owner) HoldsSlot() bool { return o.slot != nil }

// Release gives back the slot of the kernel's default name, if it has one: a kernel
// started next on this host and store may take the name. With a slot, it first
// calls stopJournal (if not nil), which must return once the journal, which may
// join again under the name, has stopped. Idempotent.
func (o *Owner) Release(stopJournal func()) {
	if o.slot != nil {
		if stopJournal != nil {
			stopJournal()
		}
		o.slot.Release()
	}
}
