"""The loader model: how glibc's ld.so finds, accepts and binds shared objects."""
