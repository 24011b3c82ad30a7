package doccheck

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the Go blocks of the documents from their sources")

// root is the repository root, seen from this package's directory.
const root = "../.."

// markerRE matches a marker line: a path relative to root and an optional function name.
var markerRE = regexp.MustCompile(`^<!-- code: (\S+\.go)(?: (\w+))? -->$`)

// block is one ```go block of a document.
type block struct {
	line       int    // line of the opening fence, 1-based
	start, end int    // the block's content: lines[start:end]
	path, fn   string // its marker; path is "" when the block has none
}

func TestDocsShowCompiledCode(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append([]string{filepath.Join(root, "README.md")}, docs...)
	for _, doc := range docs {
		name, _ := filepath.Rel(root, doc)
		t.Run(name, func(t *testing.T) { checkDoc(t, doc, name) })
	}
}

func checkDoc(t *testing.T, doc, name string) {
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	blocks, err := goBlocks(lines)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out []string // the document with every block as its source says, for -update
	prev := 0
	changed := false
	for _, b := range blocks {
		if b.path == "" {
			t.Errorf("%s:%d: a ```go block without a `<!-- code: PATH [FUNC] -->` line before it; "+
				"put the code in a compiled file and name it", name, b.line)
			continue
		}
		want, err := source(filepath.Join(root, filepath.FromSlash(b.path)), b.fn)
		if err != nil {
			t.Errorf("%s:%d: %v", name, b.line, err)
			continue
		}
		got := lines[b.start:b.end]
		out = append(out, lines[prev:b.start]...)
		out = append(out, want...)
		prev = b.end
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			changed = true
			if !*update {
				t.Errorf("%s:%d: the block differs from %s (first difference at its line %d); "+
					"run go test ./internal/doccheck -update", name, b.line, strings.TrimSpace(b.path+" "+b.fn), firstDiff(got, want)+1)
			}
		}
	}
	if *update && changed {
		out = append(out, lines[prev:]...)
		if err := os.WriteFile(doc, []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: rewrote its Go blocks from their sources", name)
	}
}

// goBlocks finds the ```go blocks of a document and the marker line before each.
func goBlocks(lines []string) ([]block, error) {
	var blocks []block
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		b := block{line: i + 1, start: i + 1}
		if i > 0 {
			if m := markerRE.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				b.path, b.fn = m[1], m[2]
			}
		}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) != "```" {
			j++
		}
		if j == len(lines) {
			return nil, fmt.Errorf("line %d: the ```go block does not end", i+1)
		}
		b.end = j
		blocks = append(blocks, b)
		i = j
	}
	return blocks, nil
}

// source returns the lines a block must show: the whole file at path, or the body
// of its function fn, one tab less indented, without the "// Output:" comment.
func source(path, fn string) ([]string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if fn == "" {
		return strings.Split(strings.TrimSuffix(string(src), "\n"), "\n"), nil
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var body *ast.BlockStmt
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == fn {
			body = fd.Body
		}
	}
	if body == nil {
		return nil, fmt.Errorf("%s has no function %s", path, fn)
	}
	text := src[fset.Position(body.Lbrace).Offset+1 : fset.Position(body.Rbrace).Offset]
	var lines []string
	for _, l := range strings.Split(strings.Trim(string(text), "\n"), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "// Output:") {
			break
		}
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("%s: %s has an empty body", path, fn)
	}
	return lines, nil
}

// firstDiff returns the index of the first line where a and b differ.
func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestSource(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x_test.go")
	src := "package x\n\nfunc Example_a() {\n\tif true {\n\t\tprintln(1)\n\t}\n\n\tprintln(2)\n\t// Output:\n\t// 1\n}\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, fn string
		want     []string
	}{
		{"body", "Example_a", []string{"if true {", "\tprintln(1)", "}", "", "println(2)"}},
		{"file", "", strings.Split(strings.TrimSuffix(src, "\n"), "\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := source(path, tt.fn)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("source(%q) = %q, want %q", tt.fn, got, tt.want)
			}
		})
	}
	if _, err := source(path, "Missing"); err == nil {
		t.Errorf("source(Missing) = nil error, want one")
	}
}

func TestGoBlocks(t *testing.T) {
	doc := "# t\n<!-- code: a/b.go Example_x -->\n```go\nx := 1\n```\n\n```go\ny\n```\n```sh\nmake\n```\n"
	blocks, err := goBlocks(strings.Split(doc, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 {
		t.Fatalf("goBlocks() = %d blocks, want 2", len(blocks))
	}
	if b := blocks[0]; b.path != "a/b.go" || b.fn != "Example_x" || b.start != 3 || b.end != 4 {
		t.Errorf("goBlocks()[0] = %+v, want a/b.go Example_x lines [3:4]", b)
	}
	if b := blocks[1]; b.path != "" {
		t.Errorf("goBlocks()[1].path = %q, want none", b.path)
	}
	if _, err := goBlocks([]string{"```go", "x"}); err == nil {
		t.Errorf("goBlocks(unterminated) = nil error, want one")
	}
}
