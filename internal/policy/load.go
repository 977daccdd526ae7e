package policy

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// IsYAMLFile reports whether a file name looks like YAML (.yaml or .yml).
func IsYAMLFile(name string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	return ext == ".yaml" || ext == ".yml"
}

// LoadPaths parses every YAML file named, or found under a directory named
// (recursively, in lexical order; hidden entries such as the ..data links
// of a mounted ConfigMap are skipped). The error is for I/O problems only;
// problems in the files are diagnostics.
func LoadPaths(paths ...string) ([]*Object, Diagnostics, error) {
	files, err := ListYAML(paths...)
	if err != nil {
		return nil, nil, err
	}
	var objs []*Object
	var diags Diagnostics
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", f, err)
		}
		o, d := ParseYAML(f, data)
		objs = append(objs, o...)
		diags = append(diags, d...)
	}
	return objs, diags, nil
}

// ListYAML expands paths to the YAML files policyd and yardctl read: files
// as given (whatever their extension), directories walked for *.yaml and
// *.yml.
func ListYAML(paths ...string) ([]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", p, err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if path != p && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.IsDir() && IsYAMLFile(d.Name()) {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("walk %s: %w", p, err)
		}
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}
