package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

// A served is one module of the repository and the versions the proxy serves for it.
type served struct {
	repo string   // absolute root of the git work tree
	dir  string   // module directory, slash-separated and relative to repo; "" for the root
	path string   // module path
	tags []string // versions tagged in git, ascending
	next []string // versions the working tree is served as, ascending
}

// load reads the module in dir (relative to repo) and the versions to serve for it.
func load(repo, dir string) (*served, error) {
	repo, err := filepath.Abs(repo)
	if err != nil {
		return nil, err
	}
	dir = path.Clean(filepath.ToSlash(dir))
	if dir == "." {
		dir = ""
	}
	gomod, err := os.ReadFile(filepath.Join(repo, filepath.FromSlash(dir), "go.mod"))
	if err != nil {
		return nil, err
	}
	m := &served{repo: repo, dir: dir, path: modfile.ModulePath(gomod)}
	if m.path == "" {
		return nil, fmt.Errorf("%s/go.mod: no module line", dir)
	}
	out, err := git(repo, "tag", "--list", m.tagPrefix()+"v*")
	if err != nil {
		return nil, err
	}
	for _, t := range strings.Fields(string(out)) {
		v := strings.TrimPrefix(t, m.tagPrefix())
		if semver.Canonical(v) == v && module.Check(m.path, v) == nil {
			m.tags = append(m.tags, v)
		}
	}
	semver.Sort(m.tags)
	m.next = nextVersions(m.tags)
	return m, nil
}

// tagPrefix is what precedes the version in the module's git tags.
func (m *served) tagPrefix() string {
	if m.dir == "" {
		return ""
	}
	return m.dir + "/"
}

// nextVersions returns the versions a working tree may be released as, given the tags so
// far: v0.1.0 before any release, then one patch step and one minor step above the
// highest release.
func nextVersions(tags []string) []string {
	last := ""
	for _, t := range tags {
		if semver.Prerelease(t) == "" && semver.Build(t) == "" {
			last = t
		}
	}
	if last == "" {
		return withoutTags([]string{"v0.1.0"}, tags)
	}
	parts := strings.SplitN(strings.TrimPrefix(last, "v"), ".", 3)
	minor, _ := strconv.Atoi(parts[1])
	patch, _ := strconv.Atoi(parts[2])
	return withoutTags([]string{
		fmt.Sprintf("v%s.%d.%d", parts[0], minor, patch+1),
		fmt.Sprintf("v%s.%d.0", parts[0], minor+1),
	}, tags)
}

func withoutTags(vs, tags []string) []string {
	var out []string
	for _, v := range vs {
		tagged := false
		for _, t := range tags {
			tagged = tagged || t == v
		}
		if !tagged {
			out = append(out, v)
		}
	}
	return out
}

// write replaces the module's @v directory under out with its tagged versions and its
// working tree.
func (m *served) write(out string) error {
	esc, err := module.EscapePath(m.path)
	if err != nil {
		return err
	}
	vdir := filepath.Join(out, filepath.FromSlash(esc), "@v")
	if err := os.RemoveAll(vdir); err != nil {
		return err
	}
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	for _, v := range m.tags {
		rev := m.tagPrefix() + v
		files, err := archiveFiles(m.repo, rev)
		if err != nil {
			return err
		}
		gomod, err := git(m.repo, "show", rev+":"+path.Join(m.dir, "go.mod"))
		if err != nil {
			return err
		}
		if err := m.writeVersion(vdir, v, gomod, commitTime(m.repo, rev), files); err != nil {
			return err
		}
	}
	files, err := worktreeFiles(m.repo)
	if err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(m.repo, filepath.FromSlash(m.dir), "go.mod"))
	if err != nil {
		return err
	}
	for _, v := range m.next {
		if err := m.writeVersion(vdir, v, gomod, commitTime(m.repo, "HEAD"), files); err != nil {
			return err
		}
	}
	list := append(append([]string(nil), m.tags...), m.next...)
	semver.Sort(list)
	return os.WriteFile(filepath.Join(vdir, "list"), []byte(strings.Join(list, "\n")+"\n"), 0o644)
}

// writeVersion writes v.info, v.mod and v.zip, the zip made of the repository files that
// belong to the module.
func (m *served) writeVersion(vdir, v string, gomod []byte, t time.Time, repoFiles []file) error {
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{v, t})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(vdir, v+".info"), info, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(vdir, v+".mod"), gomod, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(vdir, v+".zip"))
	if err != nil {
		return err
	}
	err = modzip.Create(f, module.Version{Path: m.path, Version: v}, moduleFiles(m.dir, repoFiles))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s@%s: %w", m.path, v, err)
	}
	return nil
}

// commitTime returns the commit time of rev, or the current time when rev has none (a
// repository without commits).
func commitTime(repo, rev string) time.Time {
	out, err := git(repo, "log", "-1", "--format=%cI", rev)
	if err == nil {
		if t, err := time.Parse(time.RFC3339, strings.TrimSpace(string(out))); err == nil {
			return t.UTC()
		}
	}
	return time.Now().UTC().Truncate(time.Second)
}
