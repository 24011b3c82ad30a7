//go:build race

package recur

const raceEnabled = true
