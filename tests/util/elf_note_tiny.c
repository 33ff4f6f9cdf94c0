/* A tiny shared object for test_elf_note: built twice, with two build IDs
 * that differ in one byte, and otherwise the same bytes. */
int progcache_test_elf_note_tiny(int x);
int progcache_test_elf_note_tiny(int x) { return x + 1; }
