from kerneltui.cli import main

if __name__ == "__main__":  # guarded: decode workers may re-import the main module
    raise SystemExit(main())
