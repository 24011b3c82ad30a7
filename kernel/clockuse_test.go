package kernel

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryClockReadGoesThroughConfigClock holds the kernel and its internal
// packages to Config.Clock: no non-test file reads the time or waits through the
// time package itself, so that a test's clock (a mock, a synctest bubble, a skewed
// clock) governs every due time, timeout, lease and commit interval.
func TestEveryClockReadGoesThroughConfigClock(t *testing.T) {
	banned := map[string]bool{
		"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
		"AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true,
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		timePkg := ""
		for _, im := range f.Imports {
			if im.Path.Value == `"time"` {
				timePkg = "time"
				if im.Name != nil {
					timePkg = im.Name.Name
				}
			}
		}
		if timePkg == "" {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == timePkg && banned[sel.Sel.Name] {
				t.Errorf("%s: time.%s: read the time through the kernel's clock (Config.Clock)", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
