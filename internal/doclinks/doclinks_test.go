package doclinks

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// root is the repository root, seen from this package's directory.
const root = "../.."

func TestDocLinksResolve(t *testing.T) {
	c := newChecker()
	pkgs, err := c.loadRepo(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) == 0 {
		t.Fatalf("loadRepo(%s) found no package", root)
	}
	for _, p := range pkgs {
		for _, b := range c.check(p) {
			t.Errorf("%s", b)
		}
	}
	t.Logf("%d doc links in %d packages", c.links, len(pkgs))
}

func TestCheckerFindsBrokenLinks(t *testing.T) {
	c := newChecker()
	pkgs, err := c.loadRepo("testdata/repo")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pkgs {
		for _, b := range c.check(p) {
			got = append(got, fmt.Sprintf("%s:%d [%s]", filepath.Base(b.pos.Filename), b.pos.Line, b.link))
		}
	}
	want := []string{
		"a.go:13 [T.Missing]",
		"a.go:15 [Nope]",
		"a.go:17 [b.Missing]",
		"a.go:20 [time.Nope]",
		"a.go:21 [sql.DB]",
		"a.go:26 [I.Undone]",
		"a.go:30 [helper]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("check(testdata/repo) =\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}
