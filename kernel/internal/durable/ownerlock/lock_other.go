//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package ownerlock

import (
	"errors"
	"os"
)

const supported = false

func lock(*os.File) (bool, error) { return false, errors.ErrUnsupported }
