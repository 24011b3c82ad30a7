// Command modproxy writes a file-system Go module proxy (for GOPROXY=file://DIR) that serves
// this repository's modules, so that a sub-module can be built as its users build it
// (GOWORK=off, no replace) before the versions it requires are published.
//
// Usage:
//
//	modproxy -out DIR [-repo DIR] MODDIR...
//
// Each MODDIR names a module directory relative to the repository root ("." for the root
// module). For each module, modproxy serves:
//
//   - every release tag of the module from its tagged commit: vX.Y.Z for the root module,
//     MODDIR/vX.Y.Z for a nested one;
//   - the working tree (the files git tracks or would add: untracked files that no
//     .gitignore names are included, ignored ones are not) as the module's next versions:
//     v0.1.0 before its first tag, then one patch step and one minor step above its
//     highest release tag (v0.1.1 and v0.2.0 after v0.1.0).
//
// A version that is neither is not served, so a require of it fails (or falls through to
// the next proxy in GOPROXY). Zips follow the module zip rules of golang.org/x/mod/zip:
// files of nested modules, vendored packages and irregular files are left out, and a
// nested module without a LICENSE gets the repository's, as the go command does.
// modproxy replaces the module's @v directory under DIR on every run.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("modproxy: ")
	out := flag.String("out", "", "directory of the proxy to write (required)")
	repo := flag.String("repo", ".", "root of the git work tree")
	flag.Usage = func() {
		log.Print("usage: modproxy -out DIR [-repo DIR] MODDIR...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	for _, dir := range flag.Args() {
		m, err := load(*repo, dir)
		if err != nil {
			log.Fatal(err)
		}
		if err := m.write(*out); err != nil {
			log.Fatal(err)
		}
		tags := "none"
		if len(m.tags) > 0 {
			tags = strings.Join(m.tags, " ")
		}
		fmt.Printf("modproxy: %s: tags %s; working tree as %s\n", m.path, tags, strings.Join(m.next, " "))
	}
}
