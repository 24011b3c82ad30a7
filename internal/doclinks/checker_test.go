package doclinks

import (
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// broken is a doc link that does not resolve.
type broken struct {
	pos  token.Position // the comment line that holds it
	link string         // the link as written, without its brackets
	why  string
}

func (b broken) String() string { return fmt.Sprintf("%s: [%s]: %s", b.pos, b.link, b.why) }

// pkgDoc is one package as go doc sees it.
type pkgDoc struct {
	path    string          // import path
	srcDir  string          // where the go command resolves its imports from
	files   []*ast.File     // its non-test files
	doc     *doc.Package    // go/doc's reading of files
	resolve *comment.Parser // go doc's parser for the package: its lookups resolve as go doc does
}

// checker reads the packages of a repository and resolves their doc links. Its
// methods are not safe for concurrent use.
type checker struct {
	fset *token.FileSet
	pkgs map[string]*pkgDoc // the packages read, by import path
	errs map[string]error   // why a path could not be loaded
	ctx  build.Context

	links int // the doc links checked so far
}

func newChecker() *checker {
	return &checker{
		fset: token.NewFileSet(),
		pkgs: make(map[string]*pkgDoc),
		errs: make(map[string]error),
		ctx:  build.Default,
	}
}

// loadRepo reads every package under root: each directory with Go files belongs to
// the module of the nearest go.mod above it. Directories named testdata, vendor, or
// starting with "." or "_" are skipped, as the go command skips them.
func (c *checker) loadRepo(root string) ([]*pkgDoc, error) {
	var pkgs []*pkgDoc
	err := filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); dir != root && (name == "testdata" || name == "vendor" ||
			strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		modDir, modPath, err := moduleOf(dir)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(modDir, dir)
		if err != nil {
			return err
		}
		importPath := modPath
		if rel != "." {
			importPath = path.Join(modPath, filepath.ToSlash(rel))
		}
		p, err := c.loadDir(dir, importPath, modDir)
		if err != nil {
			return err
		}
		if p != nil {
			pkgs = append(pkgs, p)
		}
		return nil
	})
	return pkgs, err
}

// moduleOf returns the directory and the path of the module that holds dir.
func moduleOf(dir string) (modDir, modPath string, err error) {
	for d := dir; ; {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
					return d, strings.Trim(f[1], `"`), nil
				}
			}
			return "", "", fmt.Errorf("%s: no module line", filepath.Join(d, "go.mod"))
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", "", fmt.Errorf("%s: in no module", dir)
		}
		d = parent
	}
}

// loadDir reads the package in dir, or returns nil when dir has no Go files.
func (c *checker) loadDir(dir, importPath, srcDir string) (*pkgDoc, error) {
	if p, ok := c.pkgs[importPath]; ok {
		return p, nil
	}
	bp, err := c.ctx.ImportDir(dir, 0)
	if _, none := errors.AsType[*build.NoGoError](err); none {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return c.parse(bp, importPath, srcDir)
}

// parse reads the non-test files of bp as go doc does.
func (c *checker) parse(bp *build.Package, importPath, srcDir string) (*pkgDoc, error) {
	var files []*ast.File
	for _, name := range slices.Concat(bp.GoFiles, bp.CgoFiles) {
		f, err := parser.ParseFile(c.fset, filepath.Join(bp.Dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	// AllDecls, as go doc -u: every declaration's doc comment is checked. Only
	// exported names can be linked (a lower-case first element names a package),
	// so the unexported declarations change no link's resolution. PreserveAST
	// keeps the doc comments in files, where check reads them.
	d, err := doc.NewFromFiles(c.fset, files, importPath, doc.AllDecls|doc.PreserveAST)
	if err != nil {
		return nil, err
	}
	p := &pkgDoc{path: importPath, srcDir: srcDir, files: files, doc: d, resolve: d.Parser()}
	c.pkgs[importPath] = p
	return p, nil
}

// imported returns the package importPath as seen from srcDir, loading it once.
func (c *checker) imported(importPath, srcDir string) (*pkgDoc, error) {
	if p, ok := c.pkgs[importPath]; ok {
		return p, nil
	}
	if err, ok := c.errs[importPath]; ok {
		return nil, err
	}
	bp, err := c.ctx.Import(importPath, srcDir, 0)
	var p *pkgDoc
	if err == nil {
		p, err = c.parse(bp, importPath, srcDir)
	}
	if err != nil {
		c.errs[importPath] = err
		return nil, err
	}
	return p, nil
}

// check returns the doc links of p that do not resolve.
func (c *checker) check(p *pkgDoc) []broken {
	var out []broken
	for _, f := range p.files {
		for _, cg := range docComments(f) {
			for _, l := range syntacticLinks(cg.Text()) {
				c.links++
				if why := c.resolveLink(p, l); why != "" {
					out = append(out, broken{pos: c.fset.Position(linkPos(cg, l)), link: linkText(l), why: why})
				}
			}
		}
	}
	return out
}

// docComments returns the doc comments of f: the package's, every declaration's,
// and those of the fields and interface methods of its types.
func docComments(f *ast.File) []*ast.CommentGroup {
	var out []*ast.CommentGroup
	add := func(cgs ...*ast.CommentGroup) {
		for _, cg := range cgs {
			if cg != nil {
				out = append(out, cg)
			}
		}
	}
	add(f.Doc)
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			add(d.Doc)
		case *ast.GenDecl:
			add(d.Doc)
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					add(s.Doc, s.Comment)
				case *ast.TypeSpec:
					add(s.Doc, s.Comment)
					ast.Inspect(s.Type, func(n ast.Node) bool {
						if fl, ok := n.(*ast.Field); ok {
							add(fl.Doc, fl.Comment)
						}
						return true
					})
				}
			}
		}
	}
	return out
}

// syntacticLinks returns every bracketed name in text that has the form of a doc
// link, resolved or not: a parser that takes every symbol for declared and every
// identifier for a package turns each of them into a *comment.DocLink, whose
// ImportPath is then the package's name as written (or its path, when written
// with slashes).
func syntacticLinks(text string) []*comment.DocLink {
	p := &comment.Parser{
		LookupPackage: func(name string) (string, bool) { return name, token.IsIdentifier(name) },
		LookupSym:     func(recv, name string) bool { return true },
	}
	var out []*comment.DocLink
	var walk func(ts []comment.Text)
	walk = func(ts []comment.Text) {
		for _, t := range ts {
			switch t := t.(type) {
			case *comment.DocLink:
				out = append(out, t)
			case *comment.Link:
				walk(t.Text)
			case *comment.Italic, comment.Plain:
			}
		}
	}
	for _, b := range p.Parse(text).Content {
		switch b := b.(type) {
		case *comment.Paragraph:
			walk(b.Text)
		case *comment.Heading:
			walk(b.Text)
		case *comment.List:
			for _, it := range b.Items {
				for _, ib := range it.Content {
					if para, ok := ib.(*comment.Paragraph); ok {
						walk(para.Text)
					}
				}
			}
		}
	}
	return out
}

// linkPos returns the position of the comment line of cg that holds l.
func linkPos(cg *ast.CommentGroup, l *comment.DocLink) token.Pos {
	for _, line := range cg.List {
		if strings.Contains(line.Text, "["+linkText(l)+"]") || strings.Contains(line.Text, "[*"+linkText(l)+"]") {
			return line.Pos()
		}
	}
	return cg.Pos()
}

// linkText is l as written between its brackets.
func linkText(l *comment.DocLink) string {
	return strings.Join(slices.DeleteFunc([]string{l.ImportPath, l.Recv, l.Name}, func(s string) bool { return s == "" }), ".")
}

// resolveLink returns why l, found in a doc comment of p, does not resolve, or "".
func (c *checker) resolveLink(p *pkgDoc, l *comment.DocLink) string {
	target := p
	if name := l.ImportPath; name != "" {
		importPath, ok := lookupPackage(p, name)
		if !ok && l.Recv == "" && l.Name == "" && p.resolve.LookupSym("", name) {
			return fmt.Sprintf("%s is not exported: a doc link names an exported declaration; "+
				"write the name without brackets", name)
		}
		if !ok {
			return fmt.Sprintf("%s is neither a package %s imports nor a standard package; "+
				"write the name without brackets, or its full import path", name, p.doc.Name)
		}
		if importPath != "" {
			t, err := c.imported(importPath, p.srcDir)
			if err != nil {
				return fmt.Sprintf("package %s cannot be read: %v", importPath, err)
			}
			target = t
		}
	}
	if l.Name == "" {
		return "" // the package itself
	}
	if !target.resolve.LookupSym(l.Recv, l.Name) {
		what := l.Name
		if l.Recv != "" {
			what = l.Recv + "." + l.Name
		}
		return fmt.Sprintf("package %s declares no exported %s", target.path, what)
	}
	return ""
}

// lookupPackage resolves a package named in a doc link of p as go doc does: an
// import of p under that name, p's own name (importPath ""), a full import path,
// or a standard package whose path is one element.
func lookupPackage(p *pkgDoc, name string) (importPath string, ok bool) {
	if strings.Contains(name, "/") {
		return name, true
	}
	if importPath, ok := p.resolve.LookupPackage(name); ok {
		return importPath, true
	}
	return comment.DefaultLookupPackage(name)
}
