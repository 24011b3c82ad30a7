package main

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	modzip "golang.org/x/mod/zip"
)

// A file is a file of the repository, named by its slash-separated path. It implements
// golang.org/x/mod/zip.File.
type file struct {
	name string
	info fs.FileInfo
	open func() (io.ReadCloser, error)
}

func (f file) Path() string                 { return f.name }
func (f file) Lstat() (fs.FileInfo, error)  { return f.info, nil }
func (f file) Open() (io.ReadCloser, error) { return f.open() }

// moduleFiles returns the files under dir ("" for the repository root), named relative to
// dir, with the repository's LICENSE added when dir has none. Files of nested modules are
// left in: golang.org/x/mod/zip.Create leaves them out of the zip.
func moduleFiles(dir string, repoFiles []file) []modzip.File {
	var out []modzip.File
	var license *file
	haveLicense := false
	for i, f := range repoFiles {
		if f.name == "LICENSE" {
			license = &repoFiles[i]
		}
		name := f.name
		if dir != "" {
			var ok bool
			if name, ok = strings.CutPrefix(f.name, dir+"/"); !ok {
				continue
			}
		}
		haveLicense = haveLicense || name == "LICENSE"
		f.name = name
		out = append(out, f)
	}
	if !haveLicense && license != nil {
		out = append(out, *license)
	}
	return out
}

// worktreeFiles returns the files of the work tree that git tracks or would add: tracked
// files that still exist, and untracked files that no .gitignore names.
func worktreeFiles(repo string) ([]file, error) {
	out, err := git(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var files []file
	for name := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		p := filepath.Join(repo, filepath.FromSlash(name))
		info, err := os.Lstat(p)
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			return nil, err
		}
		files = append(files, file{name: name, info: info, open: func() (io.ReadCloser, error) { return os.Open(p) }})
	}
	return files, nil
}

// archiveFiles returns the files of the commit rev, as git archive writes them (with
// the line endings a checkout on any system has).
func archiveFiles(repo, rev string) ([]file, error) {
	out, err := git(repo, "-c", "core.autocrlf=input", "-c", "core.eol=lf", "archive", "--format=zip", rev)
	if err != nil {
		return nil, err
	}
	zr, err := zip.NewReader(bytes.NewReader(out), int64(len(out)))
	if err != nil {
		return nil, fmt.Errorf("git archive %s: %w", rev, err)
	}
	var files []file
	for _, zf := range zr.File {
		if strings.HasSuffix(zf.Name, "/") {
			continue
		}
		files = append(files, file{name: zf.Name, info: zf.FileInfo(), open: zf.Open})
	}
	return files, nil
}

// git runs git in repo and returns its standard output.
func git(repo string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = repo
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
