package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// WriteSecretFiles writes files into dir the way the kubelet updates a
// mounted Secret: into a new directory, then an atomic rename of the ..data
// symlink the files point through, so that a reader never sees a new
// certificate beside an old key.
func WriteSecretFiles(dir string, files map[string][]byte) error {
	gen := filepath.Join(dir, fmt.Sprintf("..gen-%d", time.Now().UnixNano()))
	if err := os.MkdirAll(gen, 0o700); err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(gen, name), data, 0o600); err != nil {
			return err
		}
	}
	tmpLink := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(gen), tmpLink); err != nil {
		return err
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, "..data")); err != nil {
		return err
	}
	for name := range files {
		if _, err := os.Lstat(filepath.Join(dir, name)); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	return nil
}
