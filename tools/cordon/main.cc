// cordon: the command-line entry point. See userspace/cli/.
#include "cli/commands.h"

int main(int argc, char** argv) { return cordon::cli::Main(argc, argv); }
