; Inno Setup 6 script: a Windows installer for the PyInstaller bundle in dist\distloop.
;
; NOT EXERCISED: written without a Windows machine; see packaging/README.md.
;
; Build (on Windows, after the bundle):
;   python packaging\build.py                (runs PyInstaller, then this script)
; or by hand:
;   pyinstaller --noconfirm packaging\distloop.spec
;   "C:\Program Files (x86)\Inno Setup 6\ISCC.exe" /DAppVersion=0.1.0 packaging\windows\distloop.iss
; AppVersion must be engine.__version__ (build.py passes it). The installer is written to dist\.

#ifndef AppVersion
  #error Pass the version: ISCC /DAppVersion=X.Y.Z packaging\windows\distloop.iss
#endif
#ifndef BundleDir
  ; the PyInstaller one-folder bundle, relative to this file
  #define BundleDir "..\..\dist\distloop"
#endif
#ifndef OutputDir
  #define OutputDir "..\..\dist"
#endif

[Setup]
; AppId identifies the app for upgrades and uninstall: never change it.
AppId={{5E0C7A0B-5B7E-4D47-9E43-2D1F0C6B8A11}
AppName=Distloop
AppVersion={#AppVersion}
AppVerName=Distloop {#AppVersion}
AppPublisher=Distloop
VersionInfoVersion={#AppVersion}
VersionInfoProductName=Distloop
VersionInfoDescription=Distloop installer
DefaultDirName={autopf}\Distloop
DefaultGroupName=Distloop
DisableProgramGroupPage=yes
; Per-user install by default (no administrator needed); the dialog offers all users.
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
; TensorFlow ships 64-bit Windows builds only.
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
MinVersion=10.0
OutputDir={#OutputDir}
OutputBaseFilename=distloop-{#AppVersion}-windows-x64-setup
SetupIconFile=distloop.ico
UninstallDisplayIcon={app}\distloopw.exe
UninstallDisplayName=Distloop {#AppVersion}
WizardStyle=modern
; The bundle is mostly TensorFlow's DLLs: lzma2 solid compression, in its own process
; so the compiler does not run out of address space.
Compression=lzma2/normal
SolidCompression=yes
LZMAUseSeparateProcess=yes
ChangesEnvironment=yes
; the engine processes of a running Distloop hold files open
CloseApplications=yes

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked
Name: "addtopath"; Description: "Add the distloop command to PATH (for distloop run in a terminal)"; GroupDescription: "Command line:"; Flags: unchecked

[Files]
; The whole one-folder bundle: distloop.exe (console: distloop run, validate, ...),
; distloopw.exe (windowed: the desktop app) and _internal\ (Python, TensorFlow, Qt).
Source: "{#BundleDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[InstallDelete]
; Files of an older version that a newer bundle no longer has must not linger in _internal.
Type: filesandordirs; Name: "{app}\_internal"

[Icons]
Name: "{autoprograms}\Distloop"; Filename: "{app}\distloopw.exe"; Comment: "TensorFlow distributed training with custom loops"
Name: "{autodesktop}\Distloop"; Filename: "{app}\distloopw.exe"; Tasks: desktopicon

[Registry]
; PATH for all users (administrator install) or for this user (per-user install).
Root: HKLM; Subkey: "SYSTEM\CurrentControlSet\Control\Session Manager\Environment"; ValueType: expandsz; ValueName: "Path"; ValueData: "{olddata};{app}"; Tasks: addtopath; Check: IsAdminInstallMode and NeedsAddPath
Root: HKCU; Subkey: "Environment"; ValueType: expandsz; ValueName: "Path"; ValueData: "{olddata};{app}"; Tasks: addtopath; Check: (not IsAdminInstallMode) and NeedsAddPath

[Run]
Filename: "{app}\distloopw.exe"; Description: "{cm:LaunchProgram,Distloop}"; Flags: nowait postinstall skipifsilent

[Code]
const
  SystemEnvironmentKey = 'SYSTEM\CurrentControlSet\Control\Session Manager\Environment';
  UserEnvironmentKey = 'Environment';

function EnvironmentRoot: Integer;
begin
  if IsAdminInstallMode then
    Result := HKEY_LOCAL_MACHINE
  else
    Result := HKEY_CURRENT_USER;
end;

function EnvironmentKey: String;
begin
  if IsAdminInstallMode then
    Result := SystemEnvironmentKey
  else
    Result := UserEnvironmentKey;
end;

{ Position of Dir in the ';'-separated Paths (1-based, 0 when absent), case-insensitive. }
function PathEntryPos(Paths, Dir: String): Integer;
begin
  Result := Pos(';' + Uppercase(Dir) + ';', ';' + Uppercase(Paths) + ';');
end;

function NeedsAddPath: Boolean;
var
  Paths: String;
begin
  if not RegQueryStringValue(EnvironmentRoot, EnvironmentKey, 'Path', Paths) then
    Result := True
  else
    Result := PathEntryPos(Paths, ExpandConstant('{app}')) = 0;
end;

procedure RemoveFromPath(Dir: String);
var
  Paths: String;
  P: Integer;
begin
  if not RegQueryStringValue(EnvironmentRoot, EnvironmentKey, 'Path', Paths) then
    exit;
  P := PathEntryPos(Paths, Dir);
  if P = 0 then
    exit;
  { Dir starts at P in Paths; remove it with the ';' before it (or after it, when first). }
  if P > 1 then
    Delete(Paths, P - 1, Length(Dir) + 1)
  else
    Delete(Paths, 1, Length(Dir) + 1);
  RegWriteExpandStringValue(EnvironmentRoot, EnvironmentKey, 'Path', Paths);
end;

procedure CurUninstallStepChanged(CurUninstallStep: TUninstallStep);
begin
  if CurUninstallStep = usPostUninstall then
    RemoveFromPath(ExpandConstant('{app}'));
end;
