//go:build !race

package recur

const raceEnabled = false
