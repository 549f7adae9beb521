// The host of the suites' precompiled Boost.Test header (Note [Test compile
// time]): a program compiled with the suites' flags, which does nothing.
int main() { return 0; }
