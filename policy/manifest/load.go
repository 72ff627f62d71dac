package manifest

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// manifestExtensions are the file types read when walking a directory.
// Files named explicitly are read whatever their extension.
var manifestExtensions = map[string]bool{".yaml": true, ".yml": true, ".json": true}

// Load reads every path: "-" is stdin, a directory is walked recursively
// (hidden directories skipped), anything else is read as a file. A path that
// cannot be read is returned as an error; documents that cannot be decoded
// are recorded in the Set.
func (s *Set) Load(paths []string, stdin io.Reader) error {
	for _, p := range paths {
		if p == "-" {
			s.Decode("-", stdin)
			continue
		}
		info, err := os.Stat(p)
		if err != nil {
			return err
		}
		if !info.IsDir() {
			if err := s.loadFile(p); err != nil {
				return err
			}
			continue
		}
		files, err := manifestFiles(p)
		if err != nil {
			return err
		}
		for _, f := range files {
			if err := s.loadFile(f); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Set) loadFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	s.Decode(path, f)
	return nil
}

// manifestFiles lists the manifest files below dir in a stable order.
func manifestFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		if d.IsDir() {
			if path != dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if manifestExtensions[strings.ToLower(filepath.Ext(path))] {
			files = append(files, path)
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}
