from rmsweb.cli import main

main()
