from ircd.cli import main

main()
