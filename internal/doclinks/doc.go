// Package doclinks keeps the doc links of the repository's Go packages pointing at
// declarations. It has no API: its test is the check.
//
// A doc comment links to a declaration by writing its name in square brackets,
// such as Kernel.Shutdown, Config, context.Context or storekit.MemoryStore. go doc
// and pkg.go.dev turn such a name into a link only when it resolves; otherwise they
// print the brackets and the name as plain text, and nothing tells the author.
//
// The test reads every package of every module under the repository root (the
// core module and the sub-modules, each read as a directory of files; testdata,
// vendor and directories starting with "." or "_" are skipped) and parses every doc
// comment with go/doc/comment, under a parser that takes every bracketed name of
// the form of a doc link for one. It then resolves each link as go doc does:
//
//   - Name and Name.Member name a declaration of the package, a method of one of
//     its types, a field of one of its structs or a method of one of its
//     interfaces;
//   - pkg.Name and pkg.Name.Member name an exported declaration of a package the
//     commented package imports under the name pkg, of a standard package whose
//     path is one element, of a package written by its full path, or of the
//     package itself;
//   - pkg alone names such a package.
//
// A link that does not resolve fails the test with its file, line and reason. The
// doc comments checked are those of the package clauses and of every declaration,
// exported or not (go doc -u shows them all), and of the fields and interface
// methods of every type; comments of test files are not checked. Packages are read
// from their source files: the repository's where they are, the standard
// library's from GOROOT, other modules' where go/build finds them.
package doclinks
